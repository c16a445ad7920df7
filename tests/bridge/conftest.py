"""Pub/Sub topics with ordered subscriptions, bridge settings, and a reader of what reached Kafka."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from google.cloud import pubsub_v1

from inturn import topics
from inturn.kafka import make_admin
from inturn.schemas import Message, decode, encode
from inturn.sdk import plan_messages, planned_to_message
from inturn.settings import KafkaSettings
from inturn.settings.bridge import BridgeSettings
from inturn_bridge.subscription import ensure
from inturn_devtools.reading import Record

PROJECT = "inturn-test"


@pytest.fixture
def ready_topics(inturn_topics: KafkaSettings) -> KafkaSettings:
    """``inturn_topics``, once the broker serves every partition of messages and dead letters."""
    topics.wait_visible(make_admin(inturn_topics), [inturn_topics.topic_messages, inturn_topics.topic_dlq])
    return inturn_topics


@dataclass
class Ordered:
    """A Pub/Sub topic and its ordered subscription."""

    topic: str  # projects/<p>/topics/<t>
    subscription: str  # the subscription id
    publisher: Any

    def publish(self, message: Message, ordering_key: str | None = None, **attributes: str) -> Any:
        """Publish ``message`` as JSON with ordering key = its room (or the one given)."""
        key = message.room_id if ordering_key is None else ordering_key
        return self.publisher.publish(self.topic, encode(message), ordering_key=key, **attributes)

    def publish_raw(self, data: bytes, ordering_key: str = "", **attributes: str) -> str:
        """Publish arbitrary bytes; returns the Pub/Sub message id."""
        return str(self.publisher.publish(self.topic, data, ordering_key=ordering_key, **attributes).result(30))


@pytest.fixture
def ordered(pubsub_host: str, test_id: str) -> Iterator[Ordered]:
    """A fresh topic with a subscription that has message ordering on (ack deadline 10 s, the minimum)."""
    subscription = f"s{test_id}"
    setup = ensure(PROJECT, f"t{test_id}", subscription, ack_deadline_s=10)
    publisher = pubsub_v1.PublisherClient(
        publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
    )
    yield Ordered(setup.topic, subscription, publisher)
    publisher.stop()


def bridge_settings(kafka: KafkaSettings, ordered: Ordered, **overrides: Any) -> BridgeSettings:
    """Bridge settings for this test's topics and subscription (both HTTP servers on any free port)."""
    fields = {**kafka.model_dump(), "bridge_project": PROJECT, "bridge_subscription": ordered.subscription}
    fields.update(bridge_http_port=0, bridge_internal_port=0, bridge_http_host="127.0.0.1")
    fields.update(bridge_kafka_delivery_timeout_ms=5000)
    fields.update(overrides)
    return BridgeSettings(**fields)


def workload(rooms: int, per_room: int, run_id: str) -> list[Message]:
    """``rooms`` x ``per_room`` messages, interleaved round robin (seq attribute = order within the room)."""
    plan = plan_messages(rooms=rooms, messages=rooms * per_room)
    return [planned_to_message(p, run_id) for p in plan]


def per_room_seqs(records: list[Record], dedupe: bool = True) -> dict[str, list[int]]:
    """Each room's ``seq`` attributes in Kafka order (first occurrence of each Pub/Sub id when ``dedupe``)."""
    seen: set[bytes] = set()
    rooms: dict[str, list[int]] = {}
    for record in records:
        pubsub_id = record.headers.get("pubsub_message_id", b"")
        if dedupe and pubsub_id in seen:
            continue
        seen.add(pubsub_id)
        message = decode(Message, record.value)
        rooms.setdefault(message.room_id, []).append(int(message.attributes["seq"]))
    return rooms
