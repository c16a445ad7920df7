"""A Kafka error while the acks reader positions a new assignment is retried, never fatal.

Found by the fault matrix: during a broker restart ``get_watermark_offsets`` answered NOT_LEADER_FOR_PARTITION and
the exception ended the worker process. The change now stays queued and is retried a second later, and the partition
is not marked caught up meanwhile. Here the error is made deterministic with a partition the acks topic does not have.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions

from inturn.kafka import make_producer
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_worker.ack_reader import AckReader
from inturn_worker.acks import AckRouter
from inturn_worker.events import EventLog
from inturn_worker.partition import PartitionState

pytestmark = [pytest.mark.kafka]


def test_a_kafka_error_while_positioning_the_acks_reader_does_not_escape_it(
    inturn_topics: KafkaSettings, test_id: str
) -> None:
    settings = WorkerSettings(**inturn_topics.model_dump(), worker_group_id=f"g{test_id}", worker_id="w1")
    events = EventLog(make_producer(settings), settings, {settings.topic_events: 4, settings.topic_dlq: 4})
    reader = AckReader(settings, AckRouter(3600), events)
    part = PartitionState(settings.topic_partitions + 5, lease_s=5)  # no such acks partition: Kafka refuses
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
    events = EventLog(make_producer(settings), settings, {settings.topic_events: 4, settings.topic_dlq: 4})
    reader = AckReader(settings, AckRouter(3600), events)
    known = PartitionState(0, lease_s=5)
    grown = PartitionState(settings.topic_partitions + 2, lease_s=5)
    try:
        reader.assign([known], since_ms=0)
        reader._apply_changes()
        assert reader._consumer.assignment() == [TopicPartition(settings.topic_acks, 0)]
        new_count = settings.topic_partitions + 4
        futures = kafka_admin.create_partitions([NewPartitions(settings.topic_acks, new_count)])
        futures[settings.topic_acks].result(30)
        reader.assign([grown], since_ms=0)
        attempts = 0
        while reader._changes and attempts < 3:
            reader._retry_at = 0.0  # the reader waits a second between attempts; the test takes the next at once
            reader._apply_changes()
            attempts += 1
        assigned = {tp.partition for tp in reader._consumer.assignment()}
    finally:
        reader._consumer.close()  # close() needs the reader's event loop; this test has none
    assert grown.partition in assigned, f"still not positioned after {attempts} attempts: the stale view stayed"
