"""Acks find their worker whatever partitioner the messages' producer used: two workers, a plain librdkafka
producer with its default partitioner (consistent_random: CRC32 of the key), which places most rooms on a
partition other than murmur2(room). Judged from the simulator's receipt log and the events topic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from inturn.kafka import partition_for
from inturn.schemas import Event, EventType, decode
from inturn.settings import KafkaSettings
from inturn_devtools.pipeline import Pipeline, message_value
from tests.durability.conftest import wait_done
from tests.worker.harness import read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

ROOMS, PER_ROOM = 60, 5


@pytest.fixture
def line(inturn_topics: KafkaSettings, postgres_dsn: str, tmp_path: Path, test_id: str) -> Iterator[Pipeline]:
    """Every callback arrives (no drops), so any ack timeout is an ack that went to the wrong worker."""
    pipeline = Pipeline(
        inturn_topics,
        postgres_dsn,
        tmp_path,
        group=f"g{test_id}",
        sim={"INTURN_SIM_LATENCY_MEDIAN_MS": "20", "INTURN_SIM_LATENCY_P99_MS": "60"},
        worker={"INTURN_WORKER_ACK_TIMEOUT_MS": "4000", "INTURN_WORKER_SESSION_TIMEOUT_MS": "6000"},
    )
    pipeline.start_sim()
    pipeline.start_webhook()
    try:
        yield pipeline
    finally:
        pipeline.stop()


def test_two_workers_and_a_default_partitioner_producer_no_ack_timeouts_and_misrouted_counted(line: Pipeline) -> None:
    for name in ("w1", "w2"):
        line.add_worker(name)
    line.wait_balanced()
    partitions = line.topics.topic_partitions
    placed: dict[str, set[int]] = {}  # room -> the partitions its messages went to

    def delivered(err: KafkaError | None, msg: Message) -> None:
        assert err is None, err
        placed.setdefault(bytes(msg.key() or b"").decode(), set()).add(msg.partition() or 0)

    # What a service in Go, Node or .NET does with its client's defaults: no partitioner set.
    producer = Producer({"bootstrap.servers": line.topics.kafka_bootstrap, "enable.idempotence": True})
    for n in range(PER_ROOM):
        for r in range(ROOMS):
            room, message_id, value = message_value("room", r, n, "")
            producer.produce(line.topics.topic_messages, key=room, value=value, on_delivery=delivered)
            line.produced.setdefault(room, []).append(message_id)
    assert producer.flush(30) == 0
    total = ROOMS * PER_ROOM
    assert all(len(where) == 1 for where in placed.values()), "a room's messages went to several partitions"
    misrouted_rooms = {room for room, where in placed.items() if where != {partition_for(room, partitions)}}
    misrouted = sum(len(line.produced[room]) for room in misrouted_rooms)
    assert misrouted > total // 2, "the default partitioner placed most rooms where murmur2 would"

    wait_done(line, total, within=120)

    report = line.report()
    assert (report.lost, report.reordered, report.duplicated, report.unexpected) == (0, 0, 0, 0), report.summary()
    events = [decode(Event, v) for v in read_topic(line.topics, line.topics.topic_events)]
    outcomes = {e.type for e in events}
    assert EventType.ACK_TIMEOUT not in outcomes, [e for e in events if e.type is EventType.ACK_TIMEOUT][:3]
    assert sum(1 for e in events if e.type is EventType.ACKED) == total
    counted = sum(line.worker_gauge(name, "inturn_worker_misrouted_messages_total") or 0 for name in line.workers)
    timeouts = sum(1 for e in events if e.type is EventType.ACK_TIMEOUT)
    print(
        f"routing: {total} messages, {len(misrouted_rooms)} of {ROOMS} rooms off murmur2 ({misrouted} messages), "
        f"counted {counted:.0f}; ack timeouts {timeouts}; {report.summary().splitlines()[0]}"
    )
    assert counted == misrouted
