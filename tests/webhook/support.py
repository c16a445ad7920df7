"""Helpers of the webhook tests: settings, a signed client, Meta payloads, topic readers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from fastapi import FastAPI

from inturn.kafka import make_consumer
from inturn.schemas import encode_callback_data
from inturn.settings import KafkaSettings
from inturn.settings.webhook import WebhookSettings
from inturn_devtools.waiting import eventually, wait_until
from inturn_webhook import create_app
from inturn_webhook.signature import sign
from tests.support.topics import read_records

APP_SECRET = "current-app-secret"
PREVIOUS_APP_SECRET = "previous-app-secret"
GENERIC_SECRET = "generic-secret"
VERIFY_TOKEN = "verify-me"
MAX_BODY = 64 * 1024


def webhook_settings_for(kafka: KafkaSettings, **overrides: object) -> WebhookSettings:
    """Webhook settings on ``kafka``'s broker and topics, with the test secrets."""
    values: dict[str, object] = {
        **kafka.model_dump(
            include={"kafka_bootstrap", "topic_messages", "topic_acks", "topic_events", "topic_dlq", "topic_statuses"}
        ),
        "webhook_app_secrets": [APP_SECRET, PREVIOUS_APP_SECRET],
        "webhook_generic_secret": [GENERIC_SECRET],
        "webhook_verify_token": VERIFY_TOKEN,
        "webhook_max_body_bytes": MAX_BODY,
        "webhook_kafka_confirm_timeout_ms": 10_000,
        "webhook_room_from_recipient": "wa:{recipient}",
        "webhook_probe_interval_s": 0.2,
    }
    values.update(overrides)
    return WebhookSettings(**values)  # type: ignore[arg-type]  # pydantic validates the values


@dataclass
class Webhook:
    """A started webhook application and a client for it."""

    app: FastAPI
    client: httpx.AsyncClient  # the public port: callbacks
    internal: httpx.AsyncClient  # the internal port: probes, metrics, the OpenAPI document
    settings: WebhookSettings

    async def ready(self) -> None:
        """Wait until the readiness probe has read the acks topic's metadata (its partition count)."""

        async def known() -> bool:
            return (await self.internal.get("/readyz")).status_code == 200

        await eventually(known, 30, "the webhook's Kafka probe to answer")

    async def post_meta(self, payload: object, secret: str = APP_SECRET) -> httpx.Response:
        """POST ``payload`` to the WhatsApp endpoint, signed with ``secret``."""
        body = orjson.dumps(payload)
        return await self.client.post(
            "/webhooks/whatsapp",
            content=body,
            headers={"X-Hub-Signature-256": sign(body, secret.encode()), "Content-Type": "application/json"},
        )


@contextlib.asynccontextmanager
async def started(settings: WebhookSettings) -> AsyncIterator[Webhook]:
    """Run the application's lifespan around a client."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        internal = f"http://webhook:{settings.webhook_internal_port}"
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://webhook") as client,
            httpx.AsyncClient(transport=transport, base_url=internal) as internal_client,
        ):
            yield Webhook(app, client, internal_client, settings)


def record_count(settings: KafkaSettings, topic: str, timeout: float = 15.0) -> int:
    """How many records ``topic`` holds (sum of high watermarks): exact once Kafka confirmed them."""
    consumer = make_consumer(settings, "watermarks")
    counted: list[int] = []

    def count() -> bool:
        try:
            counted.append(
                sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
            )
        except KafkaException as exc:
            # A topic created a moment ago may not have its leaders settled yet.
            if exc.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION:
                raise
            return False
        return True

    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        wait_until(count, timeout, f"the high watermarks of {topic}")
    finally:
        consumer.close()
    return counted[-1]


def read_topic(
    settings: KafkaSettings, topic: str, expected: int, timeout: float = 20.0
) -> list[tuple[str, int, bytes]]:
    """(key, partition, value) of the first ``expected`` records of ``topic``; fails after ``timeout``."""
    got = [(r.key or "", r.partition, r.value) for r in read_records(settings, topic, expected, timeout)]
    assert len(got) == expected, f"{topic}: {len(got)} records, expected {expected}"
    return got


def meta_status(
    pmid: str,
    status: str = "sent",
    *,
    room: str | None = None,
    message: str | None = None,
    recipient: str = "491700000001",
    timestamp: str = "1700000000.123",
    **extra: Any,
) -> dict[str, Any]:
    """One status as Meta sends it; with inturn callback data when ``room`` and ``message`` are given."""
    out: dict[str, Any] = {"id": pmid, "status": status, "timestamp": timestamp, "recipient_id": recipient}
    if room is not None and message is not None:
        out["biz_opaque_callback_data"] = encode_callback_data(room, message)
    out.update(extra)
    return out


def meta_payload(*statuses: dict[str, Any], messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Meta's webhook envelope around ``statuses`` (and incoming ``messages``), one change."""
    value: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550000000", "phone_number_id": "1055500"},
    }
    if statuses:
        value["statuses"] = list(statuses)
    if messages is not None:
        value["messages"] = messages
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": "WABA1", "changes": [{"value": value, "field": "messages"}]}],
    }
