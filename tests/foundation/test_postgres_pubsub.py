"""The real PostgreSQL (migrations) and the Pub/Sub emulator (ordered publish and pull)."""

from __future__ import annotations

import asyncpg
import pytest
from google.cloud import pubsub_v1

from inturn.db import applied_versions, migrate


@pytest.mark.postgres
async def test_migrations_apply_once_and_a_second_run_changes_nothing(pg_schema: str) -> None:
    conn = await asyncpg.connect(pg_schema)
    try:
        first = await migrate(conn)
        second = await migrate(conn)
        versions = await applied_versions(conn)
        tables = {
            r["table_name"]
            for r in await conn.fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            )
        }
    finally:
        await conn.close()
    assert first == ["0001_initial.sql", "0002_recent_message_ids.sql"]
    assert second == []
    assert versions == ["0001_initial.sql", "0002_recent_message_ids.sql"]
    assert {
        "room_cursors",
        "partition_epochs",
        "dead_letters",
        "blocked_rooms",
        "schema_migrations",
    } <= tables


@pytest.mark.pubsub
def test_pubsub_emulator_delivers_messages_of_an_ordering_key_in_order(pubsub_host: str, test_id: str) -> None:
    project = "inturn-test"
    publisher = pubsub_v1.PublisherClient(
        publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
    )
    subscriber = pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(project, f"t{test_id}")
    sub = subscriber.subscription_path(project, f"s{test_id}")
    publisher.create_topic(name=topic)
    subscriber.create_subscription(request={"name": sub, "topic": topic, "enable_message_ordering": True})
    for i in range(5):
        publisher.publish(topic, f"m{i}".encode(), ordering_key="room-A").result(timeout=30)
    got: list[str] = []
    for _ in range(20):
        if len(got) >= 5:
            break
        resp = subscriber.pull(subscription=sub, max_messages=10, timeout=10)
        for received in resp.received_messages:
            assert received.message.ordering_key == "room-A"
            got.append(received.message.data.decode())
        if resp.received_messages:
            subscriber.acknowledge(subscription=sub, ack_ids=[r.ack_id for r in resp.received_messages])
    subscriber.close()
    assert got == [f"m{i}" for i in range(5)]
