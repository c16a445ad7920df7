"""A worker exits when Kafka refuses to position its acks reader after an assignment.

Found by the Kafka-broker row of the matrix (docs/reliability.md, problem 3): a worker that got its
partitions while the broker was shutting down died with

    ack_reader.py, in _apply_changes: self._consumer.get_watermark_offsets(...)
    KafkaException: NOT_LEADER_FOR_PARTITION "Failed to get watermark offsets"

The reader's thread lets the exception out, the worker drains and exits, and the group is left one
worker short (its rooms re-sent by the survivor). This pins the step: a Kafka error while the reader
positions a newly assigned partition must not escape it (retry, or report the partition not ready).
Here the error is made deterministic with a partition the acks topic does not have.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException

from inturn.kafka import make_producer
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_worker.ack_reader import AckReader
from inturn_worker.acks import AckRouter
from inturn_worker.events import EventLog
from inturn_worker.partition import PartitionState

pytestmark = [pytest.mark.chaos, pytest.mark.kafka]


@pytest.mark.xfail(
    strict=True,
    reason="AckReader._apply_changes lets a KafkaException from offsets_for_times/get_watermark_offsets "
    "escape (seen: NOT_LEADER_FOR_PARTITION during a broker restart), which ends the worker process",
)
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
