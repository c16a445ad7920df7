"""What the webhook's ack records carry besides their value, how many requests share Kafka's confirmations, and
what it says at start-up about finding rooms."""

from __future__ import annotations

import asyncio

import pytest
import structlog
from structlog.testing import capture_logs

import inturn_webhook.app
from inturn import schemas
from inturn.schemas import Ack
from inturn.settings import KafkaSettings
from inturn.settings.webhook import WebhookSettings
from inturn_devtools.reading import reading

from .support import Webhook, meta_payload, meta_status, read_topic, started, webhook_settings_for

pytestmark = pytest.mark.kafka

Record = tuple[bytes, dict[str, bytes]]  # value, headers


def read_with_headers(settings: KafkaSettings, topic: str, expected: int, timeout: float = 20.0) -> list[Record]:
    """(value, headers) of the first ``expected`` records of ``topic``; fails after ``timeout``."""
    with reading(settings, topic) as reader:
        got = [(r.value, r.headers) for r in reader.at_least(expected, timeout)]
    assert len(got) == expected, f"{topic}: {len(got)} records, expected {expected}"
    return got


async def test_every_ack_record_names_its_status_and_ids_in_kafka_headers(webhook: Webhook) -> None:
    settings = webhook.settings
    response = await webhook.post_meta(
        meta_payload(
            meta_status("wamid.echoed", "delivered", room="room-1", message="msg-ü"),
            meta_status("wamid.recipient", "read", recipient="4917"),  # no callback data: room from recipient
        )
    )
    assert response.status_code == 200, response.text
    by_pmid = {}
    for value, headers in read_with_headers(settings, settings.topic_acks, 2):
        by_pmid[schemas.decode(Ack, value).platform_message_id] = headers
    assert by_pmid["wamid.echoed"] == {
        "inturn-status": b"delivered",
        "inturn-platform-message-id": b"wamid.echoed",
        "inturn-message-id": "msg-ü".encode(),
    }
    # The platform echoed no inturn message id: the header is absent, not empty.
    assert by_pmid["wamid.recipient"] == {"inturn-status": b"read", "inturn-platform-message-id": b"wamid.recipient"}


async def test_many_callbacks_in_flight_at_once_are_each_answered_after_their_own_ack_is_confirmed(
    webhook: Webhook,
) -> None:
    settings = webhook.settings
    count = 200
    responses = await asyncio.gather(
        *(
            webhook.post_meta(meta_payload(meta_status(f"wamid.{i}", "sent", room=f"room-{i % 7}", message=f"m{i}")))
            for i in range(count)
        )
    )
    assert [r.status_code for r in responses] == [200] * count
    assert sum(r.json()["published"] for r in responses) == count
    published = {
        schemas.decode(Ack, value).platform_message_id
        for _, _, value in read_topic(settings, settings.topic_acks, count)
    }
    assert published == {f"wamid.{i}" for i in range(count)}


@pytest.fixture
def fresh_app_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    """The application's logger, not yet bound: loggers cache their processors on first use, so one bound
    before another test re-configured structlog would log past ``capture_logs``."""
    monkeypatch.setattr(inturn_webhook.app, "log", structlog.get_logger("inturn.webhook"))


@pytest.mark.usefixtures("fresh_app_logger")
async def test_without_a_recipient_fallback_the_webhook_warns_at_start_up_that_such_statuses_are_dead_lettered(
    inturn_topics: KafkaSettings,
) -> None:
    settings = webhook_settings_for(inturn_topics, webhook_room_from_recipient=None)
    with capture_logs() as logs:
        async with started(settings):
            pass
    [event] = [e for e in logs if e["event"] == "room_lookup"]
    assert event["log_level"] == "warning"
    assert (event["first"], event["fallback"]) == ("callback_data", "none")
    assert "dead-lettered" in event["without_callback_data"]


@pytest.mark.usefixtures("fresh_app_logger")
async def test_with_a_recipient_template_the_webhook_logs_it_at_start_up(webhook_settings: WebhookSettings) -> None:
    with capture_logs() as logs:
        async with started(webhook_settings):
            pass
    [event] = [e for e in logs if e["event"] == "room_lookup"]
    assert event == {
        "event": "room_lookup",
        "log_level": "info",
        "first": "callback_data",
        "fallback": "template",
        "template": "wa:{recipient}",
    }


@pytest.mark.usefixtures("fresh_app_logger")
async def test_with_a_recipient_map_the_webhook_logs_how_many_recipients_it_maps(
    inturn_topics: KafkaSettings,
) -> None:
    settings = webhook_settings_for(inturn_topics, webhook_room_from_recipient='{"4917": "room-a", "4918": "room-b"}')
    with capture_logs() as logs:
        async with started(settings):
            pass
    [event] = [e for e in logs if e["event"] == "room_lookup"]
    assert (event["log_level"], event["fallback"], event["mapped_recipients"]) == ("info", "mapping", 2)
