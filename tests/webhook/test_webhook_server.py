"""``inturn webhook``: refuses a bad topic layout, and serves real HTTP (uvicorn) until SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import httpx
import orjson
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from inturn import schemas, topics
from inturn.errors import TopicMissingError
from inturn.schemas import Ack
from inturn.settings import KafkaSettings
from inturn_cli.main import main
from inturn_devtools.process import free_port
from inturn_devtools.waiting import wait_until
from inturn_webhook.serve import check_topics
from inturn_webhook.signature import sign

from .support import APP_SECRET, MAX_BODY, meta_payload, meta_status, read_topic, webhook_settings_for

pytestmark = pytest.mark.kafka


def _env(settings: KafkaSettings, port: int, internal_port: int | None = None) -> dict[str, str]:
    return {
        "INTURN_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "INTURN_TOPIC_MESSAGES": settings.topic_messages,
        "INTURN_TOPIC_ACKS": settings.topic_acks,
        "INTURN_TOPIC_EVENTS": settings.topic_events,
        "INTURN_TOPIC_DLQ": settings.topic_dlq,
        "INTURN_TOPIC_STATUSES": settings.topic_statuses,
        "INTURN_WEBHOOK_APP_SECRETS": APP_SECRET,
        "INTURN_WEBHOOK_MAX_BODY_BYTES": str(MAX_BODY),
        "INTURN_WEBHOOK_HOST": "127.0.0.1",
        "INTURN_WEBHOOK_PORT": str(port),
        "INTURN_WEBHOOK_INTERNAL_PORT": str(internal_port or free_port()),
        "INTURN_WEBHOOK_PROBE_INTERVAL_S": "0.2",
        "INTURN_LOG_FORMAT": "json",
    }


def test_the_webhook_refuses_to_start_when_messages_and_acks_partition_counts_differ(
    kafka_settings: KafkaSettings, kafka_admin: AdminClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    new = [
        NewTopic(kafka_settings.topic_messages, num_partitions=4, replication_factor=1),
        NewTopic(kafka_settings.topic_acks, num_partitions=3, replication_factor=1),
        NewTopic(kafka_settings.topic_events, num_partitions=1, replication_factor=1),
        NewTopic(kafka_settings.topic_dlq, num_partitions=1, replication_factor=1),
        NewTopic(kafka_settings.topic_statuses, num_partitions=1, replication_factor=1),
    ]
    for future in kafka_admin.create_topics(new).values():
        future.result(30)
    topics.wait_visible(kafka_admin, [t.topic for t in new])
    for key, value in _env(kafka_settings, free_port()).items():
        monkeypatch.setenv(key, value)
    assert main(["webhook"]) == 1


def test_the_webhook_refuses_to_start_without_the_statuses_topic_unless_the_split_is_off(
    kafka_settings: KafkaSettings,
    kafka_admin: AdminClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = [
        kafka_settings.topic_messages,
        kafka_settings.topic_acks,
        kafka_settings.topic_events,
        kafka_settings.topic_dlq,
    ]
    for future in kafka_admin.create_topics(
        [NewTopic(n, num_partitions=2, replication_factor=1) for n in names]
    ).values():
        future.result(30)
    topics.wait_visible(kafka_admin, names)
    for key, value in _env(kafka_settings, free_port()).items():
        monkeypatch.setenv(key, value)
    assert main(["webhook"]) == 1
    with pytest.raises(TopicMissingError, match=f"missing topics: {kafka_settings.topic_statuses};"):
        check_topics(webhook_settings_for(kafka_settings))
    # Split off, the webhook writes no statuses topic and needs none.
    off = webhook_settings_for(kafka_settings, webhook_statuses_split=False)
    assert check_topics(off).statuses is None


@pytest.fixture
def served(inturn_topics: KafkaSettings) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``inturn webhook`` running in a process of its own; its base URL."""
    port, internal = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "inturn_cli.main", "webhook"],
        env={**os.environ, **_env(inturn_topics, port, internal)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: httpx.get(f"http://127.0.0.1:{internal}/readyz", timeout=1).status_code == 200,
            60,  # its start-up takes 25 s on a 2-core machine at load average 40
            lambda: f"the webhook ready; stderr: {proc.stderr.read().decode() if proc.stderr and proc.poll() else ''}",
            every=0.1,
            ignore=(httpx.TransportError,),  # not listening yet
            proc=proc,
        )
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_the_served_webhook_publishes_over_real_http_and_stops_on_sigterm(
    served: tuple[str, subprocess.Popen[bytes]], inturn_topics: KafkaSettings
) -> None:
    base, proc = served
    body = orjson.dumps(meta_payload(meta_status("wamid.http", "read", room="room-h", message="m-h")))
    with httpx.Client(base_url=base, timeout=10) as client:
        ok = client.post(
            "/webhooks/whatsapp", content=body, headers={"X-Hub-Signature-256": sign(body, APP_SECRET.encode())}
        )
        chunked = client.post(
            "/webhooks/whatsapp",
            content=iter([b"z" * 8192] * (MAX_BODY // 8192 + 4)),
            headers={"X-Hub-Signature-256": "sha256=" + "b" * 64},
        )
    assert ok.status_code == 200, ok.text
    assert chunked.status_code == 413
    [(key, _, value)] = read_topic(inturn_topics, inturn_topics.topic_acks, 1)
    assert (key, schemas.decode(Ack, value).message_id) == ("room-h", "m-h")
    proc.send_signal(signal.SIGTERM)
    # uvicorn finishes in-flight requests, runs the lifespan shutdown, then re-raises the signal.
    assert proc.wait(30) in (0, -signal.SIGTERM)
    assert proc.stderr is not None
    events = [orjson.loads(line) for line in proc.stderr.read().splitlines() if line.startswith(b"{")]
    assert [e["event"] for e in events if e["event"].startswith("webhook_")] == ["webhook_started", "webhook_stopped"]
    assert next(e for e in events if e["event"] == "webhook_stopped")["undelivered"] == 0
