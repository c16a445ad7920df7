"""A Kafka error while the acks reader positions a new assignment is retried, never fatal.

Found by the fault matrix: during a broker restart ``get_watermark_offsets`` answered NOT_LEADER_FOR_PARTITION and
the exception ended the worker process. The change now stays queued and is retried a second later, and the partition
is not marked caught up meanwhile. Here the error is made deterministic with a partition the acks topic does not have.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from inturn.kafka import make_consumer, make_producer, partition_for
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_devtools.process import free_port
from inturn_devtools.waiting import wait_until
from inturn_worker.ack_reader import REBUILD_AFTER, AckReader, AckRecord
from inturn_worker.acks import AckRouter
from inturn_worker.events import EventLog
from inturn_worker.partition import Partition
from tests.worker.harness import ack_of, ack_reader, publish_acks

pytestmark = [pytest.mark.kafka]


def test_a_kafka_error_while_positioning_the_acks_reader_does_not_escape_it(
    inturn_topics: KafkaSettings, test_id: str
) -> None:
    settings = WorkerSettings(**inturn_topics.model_dump(), worker_group_id=f"g{test_id}", worker_id="w1")
    reader = ack_reader(settings)
    part = Partition(settings.topic_partitions + 5, lease_s=5)  # no such acks partition: Kafka refuses
    try:
        reader.assign([part], since_ms=0)
        try:
            reader._apply_changes()  # the reader thread's first step after an assignment
        except KafkaException as exc:
            pytest.fail(f"the reader let a Kafka error out (the worker would exit): {exc}")
        assert not part.acks_ready
    finally:
        reader._consumer.close()  # close() needs the reader's event loop; this test has none


def test_the_acks_reader_refreshes_a_stale_view_of_the_acks_topic_before_it_retries(
    inturn_topics: KafkaSettings, kafka_admin: AdminClient, test_id: str
) -> None:
    """Found by the fault matrix's broker row: after a restart one worker's acks reader answered every positioning
    of its new partitions with "Local: Unknown partition" for minutes (its cached metadata of the acks topic was
    stale and nothing refreshed it), and those partitions never sent again. Here the cache is made stale on
    purpose: the reader learns the topic, then the topic grows, then a partition beyond the old count is assigned."""
    settings = WorkerSettings(**inturn_topics.model_dump(), worker_group_id=f"g{test_id}", worker_id="w1")
    reader = ack_reader(settings)
    known = Partition(0, lease_s=5)
    grown = Partition(settings.topic_partitions + 2, lease_s=5)
    try:
        reader.assign([known], since_ms=0)
        reader._apply_changes()
        assert reader._consumer.assignment() == [TopicPartition(settings.topic_acks, 0)]
        new_count = settings.topic_partitions + 4
        futures = kafka_admin.create_partitions([NewPartitions(settings.topic_acks, new_count)])
        futures[settings.topic_acks].result(30)
        reader.assign([grown], since_ms=0)
        attempts = 0
        # Fewer attempts than it takes the reader to replace its client: only the refresh can have helped.
        while reader._changes and attempts < REBUILD_AFTER - 1:
            reader._retry_at = 0.0  # the reader waits a second between attempts; the test takes the next at once
            reader._apply_changes()
            attempts += 1
        assigned = {tp.partition for tp in reader._consumer.assignment()}
    finally:
        reader._consumer.close()  # close() needs the reader's event loop; this test has none
    assert grown.partition in assigned, f"still not positioned after {attempts} attempts: the stale view stayed"


def test_an_acks_reader_whose_client_cannot_reach_kafka_replaces_it_and_keeps_its_place(
    inturn_topics: KafkaSettings, test_id: str
) -> None:
    """Found by the fault matrix's broker row (in CI): after the restart one worker's acks client answered every
    lookup with "all broker connections are down" for four minutes while the broker served the other clients, and
    the worker's new partitions never sent. Here the reader's client is swapped for one that can reach no broker;
    after a few failed attempts the reader must build a new one that goes on where the old one was."""
    settings = WorkerSettings(**inturn_topics.model_dump(), worker_group_id=f"g{test_id}", worker_id="w1")
    partitions = settings.topic_partitions
    room = "room-0"
    first = partition_for(room, partitions)
    other_room = next(f"room-{n}" for n in range(1, 100) if partition_for(f"room-{n}", partitions) != first)
    second = partition_for(other_room, partitions)
    publish_acks(settings, [ack_of(room, n) for n in range(3)])
    routed: list[tuple[int, int]] = []

    class Recording(AckReader):
        """Records where each routed ack was instead of routing it."""

        def _route(self, record: AckRecord) -> None:
            routed.append((record.partition() or 0, record.offset() or 0))

    events = EventLog(make_producer(settings), settings, {settings.topic_events: 4, settings.topic_dlq: 4})
    reader = Recording(settings, AckRouter(3600), events)
    reader.lookup_timeout_s = 1.0

    def read_until(count: int) -> None:
        def step() -> bool:
            reader._retry_at = 0.0
            batch, _ = reader._step()
            for record in batch:
                assert record.error() is None, record.error()
                reader._handle(record)
            return len(routed) >= count

        wait_until(step, 30, lambda: f"{count} acks routed (have {routed})", every=0)

    try:
        reader.assign([Partition(first, lease_s=5)], since_ms=0)
        read_until(3)
        good = reader._consumer
        wedged = make_consumer(settings.model_copy(update={"kafka_bootstrap": f"127.0.0.1:{free_port()}"}), "wedged")
        wedged.incremental_assign(good.assignment())
        reader._consumer = wedged  # the client that can reach no broker
        good.close()
        reader.assign([Partition(second, lease_s=5)], since_ms=0)
        attempts = 0
        while reader._changes:
            assert attempts < 10, "the reader kept its dead client"
            reader._retry_at = 0.0
            reader._apply_changes()
            attempts += 1
        assert reader._consumer is not wedged
        assigned = {tp.partition for tp in reader._consumer.assignment()}
        publish_acks(settings, [ack_of(room, 3), ack_of(other_room, 0)])
        read_until(5)
    finally:
        reader._consumer.close()
    assert assigned == {first, second}
    # Where the old client was: the 4th ack of the first partition next (offset 3), not the first three again.
    assert sorted(routed[3:]) == sorted([(first, 3), (second, 0)])
