"""The producer SDK against real Kafka, the workload plan of `inturn produce`, and the command itself."""

from __future__ import annotations

import asyncio

import pytest
from google.cloud import pubsub_v1

from inturn.errors import InturnError
from inturn.kafka import partition_for
from inturn.schemas import Message, decode
from inturn.sdk import Delivery, MessageProducer, build_message, parse_pattern, plan_messages
from inturn.settings import KafkaSettings
from inturn_bridge.subscription import ensure
from inturn_cli.main import main
from inturn_devtools.waiting import wait_until
from tests.support.topics import cli_on, read_records


def read_messages(settings: KafkaSettings, expected: int, timeout: float = 30.0) -> list[tuple[str, int, Message]]:
    """(key, partition, message) of ``expected`` records of the messages topic, in partition order."""
    records = sorted(
        read_records(settings, settings.topic_messages, expected, timeout), key=lambda r: (r.partition, r.offset)
    )
    got = [(r.key or "", r.partition, decode(Message, r.value)) for r in records]
    assert len(got) == expected, f"read {len(got)} of {expected} records"
    return got


@pytest.mark.kafka
def test_sent_messages_land_keyed_by_room_on_the_rooms_partition_in_send_order(inturn_topics: KafkaSettings) -> None:
    rooms = [f"room-{i}" for i in range(5)]
    with MessageProducer(inturn_topics) as producer:
        sent = [
            build_message(room, recipient="4917000001", payload={"type": "text", "text": {"body": str(n)}})
            for n in range(40)
            for room in rooms
        ]
        futures = [producer.send(m) for m in sent]
        deliveries = [f.result(30) for f in futures]
    assert all(isinstance(d, Delivery) and d.topic == inturn_topics.topic_messages for d in deliveries)
    for message, delivery in zip(sent, deliveries, strict=True):
        assert delivery.partition == partition_for(message.room_id, inturn_topics.topic_partitions)
    records = read_messages(inturn_topics, len(sent))
    for key, partition, message in records:
        assert key == message.room_id
        assert partition == partition_for(key, inturn_topics.topic_partitions)
    for room in rooms:
        assert [m.message_id for _, _, m in records if m.room_id == room] == [
            m.message_id for m in sent if m.room_id == room
        ]


@pytest.mark.kafka
async def test_send_async_resolves_in_the_event_loop_and_close_refuses_further_sends(
    inturn_topics: KafkaSettings,
) -> None:
    producer = MessageProducer(inturn_topics)
    message = build_message("room-async", recipient="1", payload={"type": "text"}, message_id="async-1")
    delivery = await asyncio.wait_for(producer.send_async(message), 30)
    assert delivery.partition == partition_for("room-async", inturn_topics.topic_partitions)
    assert producer.close() == 0
    with pytest.raises(InturnError, match="closed"):
        producer.send(message)


def test_a_pattern_is_produced_token_by_token_and_each_room_is_numbered_in_production_order() -> None:
    plan = list(plan_messages(pattern="A7 B3 A6 A5 C5 C4 B2"))
    assert [(p.room_id, p.seq, p.label) for p in plan] == [
        ("room-A", 1, "A7"),
        ("room-B", 1, "B3"),
        ("room-A", 2, "A6"),
        ("room-A", 3, "A5"),
        ("room-C", 1, "C5"),
        ("room-C", 2, "C4"),
        ("room-B", 2, "B2"),
    ]
    repeated = list(plan_messages(pattern="A1,B1", messages=5))
    assert [(p.room_id, p.seq) for p in repeated] == [
        ("room-A", 1),
        ("room-B", 1),
        ("room-A", 2),
        ("room-B", 2),
        ("room-A", 3),
    ]
    round_robin = list(plan_messages(rooms=3, messages=7))
    assert [(p.room_id, p.seq) for p in round_robin][:4] == [
        ("room-0001", 1),
        ("room-0002", 1),
        ("room-0003", 1),
        ("room-0001", 2),
    ]
    with pytest.raises(ValueError, match="bad pattern token '7A'"):
        parse_pattern("A7 7A")


@pytest.mark.kafka
def test_inturn_produce_with_a_pattern_writes_that_interleaving_to_kafka(
    inturn_topics: KafkaSettings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_on(inturn_topics, monkeypatch)
    code = main(["produce", "--pattern", "A7 B3 A6 A5 C5 C4 B2", "--run-id", "pat", "--rate", "1000"])
    assert code == 0
    assert "produced 7 of 7 messages over 3 rooms" in capsys.readouterr().err
    records = read_messages(inturn_topics, 7)
    room_a = [m for _, _, m in records if m.room_id == "room-A"]
    assert [(m.attributes["label"], m.attributes["seq"], m.message_id) for m in room_a] == [
        ("A7", "1", "pat-room-A-1"),
        ("A6", "2", "pat-room-A-2"),
        ("A5", "3", "pat-room-A-3"),
    ]


@pytest.mark.pubsub
def test_inturn_produce_to_pubsub_publishes_with_the_room_as_ordering_key(
    pubsub_host: str, test_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = ensure("inturn-test", f"p{test_id}", f"p{test_id}")
    topic, subscription = setup.topic, setup.subscription
    subscriber = pubsub_v1.SubscriberClient()
    code = main(["produce", "--rooms", "3", "--messages", "12", "--to", "pubsub", "--pubsub-topic", topic])
    assert code == 0
    assert "produced 12 of 12 messages over 3 rooms" in capsys.readouterr().err
    seen: dict[str, list[int]] = {}

    def pulled_all() -> bool:
        response = subscriber.pull(subscription=subscription, max_messages=50, timeout=10)
        for received in response.received_messages:
            message = decode(Message, received.message.data)
            assert received.message.ordering_key == message.room_id
            seen.setdefault(message.room_id, []).append(int(message.attributes["seq"]))
        if response.received_messages:
            subscriber.acknowledge(subscription=subscription, ack_ids=[r.ack_id for r in response.received_messages])
        return sum(map(len, seen.values())) >= 12

    wait_until(pulled_all, 30, lambda: f"12 messages pulled (have {seen})", every=0)
    subscriber.close()
    assert seen == {f"room-000{i}": [1, 2, 3, 4] for i in (1, 2, 3)}


def test_inturn_produce_refuses_rooms_together_with_a_pattern(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["produce", "--rooms", "3", "--pattern", "A1 B2"]) == 1  # every CLI failure exits 1 (docs/cli.md)
    assert "exclude each other" in capsys.readouterr().err
