"""The real broker: keyed round trips, Java-compatible partitioning, and the topic layout check."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from inturn import topics
from inturn.errors import TopicMismatchError, TopicMissingError
from inturn.kafka import make_consumer, make_producer, murmur2, partition_for, producer_config
from inturn.settings import KafkaSettings
from inturn_devtools.kafka import kafka_lib_dir
from inturn_devtools.reading import TopicReader, reading
from inturn_devtools.waiting import wait_until

pytestmark = pytest.mark.kafka

# Kafka's own test vectors for Utils.murmur2 (clients/src/test/.../utils/UtilsTest.java).
JAVA_MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

KEYS = ["room-A", "room-B", "room-C", "", "x", "chat:42", "ünïcödé-room", *(f"room-{i}" for i in range(40))]


def java_partitions(partitions: int, keys: list[str]) -> dict[str, int]:
    """Partitions chosen by the Java producer's own code, run on the JVM."""
    source = Path(__file__).parent.parent / "java" / "PartitionOracle.java"
    out = subprocess.run(
        ["java", "-cp", f"{kafka_lib_dir()}/*", str(source), str(partitions), *keys],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    pairs = [line.split("\t") for line in out.splitlines()]
    return {key: int(part) for key, part in pairs}


def consume_all(consumer: Consumer, expected: int, timeout: float = 30.0) -> list[tuple[str, int, bytes]]:
    """(key, partition, value) of ``expected`` records, or fail after ``timeout`` seconds."""
    got: list[tuple[str, int, bytes]] = []

    def enough() -> bool:
        for msg in consumer.consume(num_messages=500, timeout=0.5):
            assert msg.error() is None, msg.error()
            got.append(((msg.key() or b"").decode(), msg.partition() or 0, msg.value() or b""))
        return len(got) >= expected

    with contextlib.suppress(TimeoutError):  # the caller asserts on what was read
        wait_until(enough, timeout, f"{expected} records", every=0)
    return got


def test_our_murmur2_matches_kafkas_published_vectors() -> None:
    for data, expected in JAVA_MURMUR2_VECTORS.items():
        assert murmur2(data) == expected, data


def test_a_produced_keyed_message_is_consumed_back(inturn_topics: KafkaSettings, test_id: str) -> None:
    producer = make_producer(inturn_topics)
    producer.produce(inturn_topics.topic_messages, key=b"room-1", value=b"hello")
    assert producer.flush(15) == 0
    consumer = make_consumer(inturn_topics, f"g{test_id}")
    consumer.subscribe([inturn_topics.topic_messages])
    try:
        got = consume_all(consumer, 1)
    finally:
        consumer.close()
    assert [(k, v) for k, _, v in got] == [("room-1", b"hello")]


@pytest.mark.parametrize("partitions", [3, 7, 12])
def test_our_producer_puts_each_key_where_the_java_producer_would(
    kafka_settings: KafkaSettings, kafka_admin: AdminClient, partitions: int, test_id: str
) -> None:
    topic = f"t{test_id}.p{partitions}"
    kafka_admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    topics.wait_visible(kafka_admin, [topic])
    producer = make_producer(kafka_settings)
    for key in KEYS:
        producer.produce(topic, key=key.encode(), value=b"v")
    assert producer.flush(15) == 0
    consumer = make_consumer(kafka_settings, f"g{test_id}")
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    try:
        placed = {key: part for key, part, _ in consume_all(consumer, len(KEYS))}
    finally:
        consumer.close()
    assert placed == java_partitions(partitions, KEYS)
    # And the partition we compute without a broker (for routing checks) agrees with Java too.
    assert {k: partition_for(k, partitions) for k in KEYS} == java_partitions(partitions, KEYS)


def test_messages_and_acks_of_a_room_land_on_the_same_partition_number(
    inturn_topics: KafkaSettings, test_id: str
) -> None:
    producer = make_producer(inturn_topics)
    rooms = [f"room-{i}" for i in range(30)]
    for room in rooms:
        producer.produce(inturn_topics.topic_messages, key=room, value=b"m")
        producer.produce(inturn_topics.topic_acks, key=room, value=b"a")
    assert producer.flush(15) == 0
    consumer = make_consumer(inturn_topics, f"g{test_id}")
    consumer.assign(
        [TopicPartition(t, p, 0) for t in (inturn_topics.topic_messages, inturn_topics.topic_acks) for p in range(4)]
    )
    seen: dict[tuple[str, bytes], int] = {}
    try:
        for key, part, value in consume_all(consumer, 2 * len(rooms)):
            seen[(key, value)] = part
    finally:
        consumer.close()
    assert len(seen) == 2 * len(rooms)
    for room in rooms:
        assert seen[(room, b"m")] == seen[(room, b"a")], room


def test_producer_config_refuses_to_weaken_ordering_guarantees(kafka_settings: KafkaSettings) -> None:
    with pytest.raises(ValueError, match="murmur2_random"):
        producer_config(kafka_settings, partitioner="consistent_random")
    with pytest.raises(ValueError, match="idempotent"):
        producer_config(kafka_settings, acks="1")


def test_topic_create_is_idempotent_and_check_accepts_the_layout(
    kafka_settings: KafkaSettings, kafka_admin: AdminClient
) -> None:
    assert sorted(topics.create(kafka_admin, kafka_settings)) == sorted(topics.topic_names(kafka_settings))
    assert topics.create(kafka_admin, kafka_settings) == []
    layout = topics.check(kafka_admin, kafka_settings)
    assert (layout.messages, layout.acks, layout.events, layout.dlq, layout.statuses) == (4, 4, 4, 4, 4)


def test_acks_carry_the_brokers_time_not_the_producers(inturn_topics: KafkaSettings) -> None:
    """A producer's clock far off (the webhook's host) must not move ack timestamps: a new owner looks acks up by
    time on its own clock (docs/reliability.md, the clock rows)."""
    producer = make_producer(inturn_topics)
    two_minutes_ago = int(time.time() * 1000) - 120_000
    producer.produce(inturn_topics.topic_acks, key=b"room", value=b"ack", timestamp=two_minutes_ago)
    producer.produce(inturn_topics.topic_statuses, key=b"room", value=b"status", timestamp=two_minutes_ago)
    producer.produce(inturn_topics.topic_messages, key=b"room", value=b"message", timestamp=two_minutes_ago)
    assert producer.flush(30) == 0
    stamps = {}
    for topic in (inturn_topics.topic_acks, inturn_topics.topic_statuses, inturn_topics.topic_messages):
        consumer = make_consumer(inturn_topics, f"stamps-{topic}")
        try:
            consumer.assign([TopicPartition(topic, partition_for("room", 4), 0)])
            record = consumer.poll(30)
            assert record is not None
            assert record.error() is None
            stamps[topic] = record.timestamp()[1]
        finally:
            consumer.close()
    assert stamps[inturn_topics.topic_messages] == two_minutes_ago  # CreateTime: the producer's
    assert stamps[inturn_topics.topic_acks] >= two_minutes_ago + 100_000  # LogAppendTime: the broker's, now
    assert stamps[inturn_topics.topic_statuses] >= two_minutes_ago + 100_000  # the report reads both by that time


def test_topic_check_rejects_mismatched_partition_counts_and_says_how_to_fix(
    kafka_settings: KafkaSettings, kafka_admin: AdminClient
) -> None:
    topics.create(kafka_admin, kafka_settings.model_copy(update={"topic_acks": kafka_settings.topic_acks + ".tmp"}))
    acks = kafka_settings.topic_acks
    kafka_admin.create_topics([NewTopic(acks, num_partitions=3, replication_factor=1)])[acks].result(30)
    topics.wait_visible(kafka_admin, [acks])
    with pytest.raises(TopicMismatchError) as err:
        topics.check(kafka_admin, kafka_settings)
    message = str(err.value)
    assert "has 4 partitions" in message
    assert "has 3" in message
    assert "--partitions 4" in message


def test_topic_check_names_missing_topics(kafka_settings: KafkaSettings, kafka_admin: AdminClient) -> None:
    with pytest.raises(TopicMissingError, match="inturn topics create"):
        topics.check(kafka_admin, kafka_settings)


def test_the_topic_reader_refuses_a_topic_that_does_not_exist(kafka_settings: KafkaSettings, test_id: str) -> None:
    with pytest.raises(LookupError, match=f"topic nothing-{test_id} has no partitions"):
        TopicReader(kafka_settings, f"nothing-{test_id}")


def test_the_topic_reader_reads_every_partition_to_its_end(inturn_topics: KafkaSettings, test_id: str) -> None:
    producer = make_producer(inturn_topics)
    keys = [f"room-{test_id}-{n}" for n in range(20)]
    for key in keys:
        producer.produce(inturn_topics.topic_messages, key=key.encode(), value=b"v")
    assert producer.flush(15) == 0
    with reading(inturn_topics, inturn_topics.topic_messages) as reader:
        records = reader.to_end(30)
    assert sorted(r.key for r in records if r.key and r.key.startswith(f"room-{test_id}-")) == sorted(keys)
