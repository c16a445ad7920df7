"""The relay's decisions against real Kafka: redeliveries written once, a failed room waits for its message."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from inturn.schemas import Message, decode, encode
from inturn.sdk import MessageProducer
from inturn.settings import KafkaSettings
from inturn.settings.bridge import BridgeSettings
from inturn_bridge.convert import PubsubRecord
from inturn_bridge.relay import NotWritten, Outcome, Relay, Settled
from inturn_devtools.process import free_port
from inturn_devtools.reading import TopicReader
from tests.bridge.conftest import workload

pytestmark = pytest.mark.kafka


def record_of(message: Message, pubsub_id: str) -> PubsubRecord:
    """A Pub/Sub message carrying ``message`` the default way (ordering key = room)."""
    return PubsubRecord(message_id=pubsub_id, data=encode(message), ordering_key=message.room_id)


def refusal(future: Future[Settled]) -> str:
    """The reason a settled future says the message was not written."""
    error = future.exception(timeout=30)
    assert isinstance(error, NotWritten), error
    return error.reason


def test_a_redelivered_message_is_acked_as_duplicate_and_written_once_within_the_window(
    ready_topics: KafkaSettings,
) -> None:
    settings = BridgeSettings(**ready_topics.model_dump(), bridge_dedupe_window=2)
    message, second, third = workload(rooms=1, per_room=3, run_id="dup")
    with MessageProducer(settings) as producer:
        relay = Relay(settings, producer)
        first = relay.submit(record_of(message, "p1")).result(30)
        again = relay.submit(record_of(message, "p1")).result(30)
        relay.submit(record_of(second, "p2")).result(30)
        relay.submit(record_of(third, "p3")).result(30)  # the window (2 ids) forgets p1 now
        after_window = relay.submit(record_of(message, "p1")).result(30)
    reader = TopicReader(ready_topics, ready_topics.topic_messages)
    reader.until(lambda r: len(r) >= 4, 30, "four records")
    reader.close()
    assert (first.outcome, again.outcome, after_window.outcome) == (Outcome.WRITTEN, Outcome.DUPLICATE, Outcome.WRITTEN)
    assert [decode(Message, r.value).message_id for r in reader.records].count(message.message_id) == 2


def test_after_a_failed_write_the_room_takes_nothing_but_that_message_until_it_is_back() -> None:
    # Kafka is unreachable (nothing listens on the port): every write fails after the delivery timeout.
    settings = BridgeSettings(kafka_bootstrap=f"127.0.0.1:{free_port()}", bridge_kafka_delivery_timeout_ms=1000)
    m1, other, m2 = workload(rooms=2, per_room=2, run_id="barrier")[:3]
    assert m1.room_id == m2.room_id != other.room_id
    producer = MessageProducer(settings, **{"message.timeout.ms": 1000})
    try:
        relay = Relay(settings, producer)
        writing = relay.submit(record_of(m1, "p1"))
        assert refusal(relay.submit(record_of(m2, "p2"))) == "room_busy"
        assert refusal(writing) == "kafka_error"
        assert refusal(relay.submit(record_of(m2, "p2"))) == "room_blocked"
        # Other rooms are not held back by it, and m1 itself may be tried again.
        assert refusal(relay.submit(record_of(other, "p3"))) == "kafka_error"
        assert refusal(relay.submit(record_of(m1, "p1"))) == "kafka_error"
        assert refusal(relay.submit(record_of(m2, "p2"))) == "room_blocked"
        assert relay.pending == 0
    finally:
        producer.close(timeout=0)
