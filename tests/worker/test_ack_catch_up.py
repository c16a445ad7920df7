"""A new owner reads its acks partitions up to where they ended at the assignment before it sends.

An ack of a message the previous owner sent proves it done when its cursor never reached PostgreSQL,
so no partition may be declared caught up before those acks were routed. librdkafka reports
OFFSET_INVALID as the position of a partition assigned at an explicit offset until its first record
was consumed; that must count as "still at the start", not "nothing to read" (found by the fault
matrix: a broker restart re-sent up to 2 messages per room before this was fixed).
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from inturn.kafka import make_consumer, partition_for
from inturn.platforms import SendResult
from inturn.schemas import AckStatus
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import wait_until
from inturn_worker.acks import AckRouter, Routed
from inturn_worker.partition import Partition
from tests.worker.harness import ack_of, ack_reader, publish_acks

pytestmark = [pytest.mark.kafka]


def acks_end(settings: KafkaSettings, partition: int) -> int:
    """The high watermark of one acks partition."""
    consumer = make_consumer(settings, "acks-end")
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(settings.topic_acks, partition), timeout=10)[1])
    finally:
        consumer.close()


def test_an_acks_partition_is_not_caught_up_before_the_acks_published_before_the_assignment_were_read(
    inturn_topics: KafkaSettings, test_id: str
) -> None:
    settings = WorkerSettings(**inturn_topics.model_dump(), worker_group_id=f"g{test_id}", worker_id="w1")
    partition = partition_for("room-0", settings.topic_partitions)
    publish_acks(settings, [ack_of("room-0", n, AckStatus.DELIVERED) for n in range(5)])
    assert acks_end(settings, partition) == 5
    reader = ack_reader(settings)
    part = Partition(partition, lease_s=5)
    try:
        reader.assign([part], since_ms=0)
        reader._apply_changes()  # the reader's own first step, without its consume round
        ready = reader._caught_up()  # the step the bug is in
    finally:
        reader._consumer.close()  # close() needs the reader's event loop; this test has none
    # Five acks wait at offsets 0..4 and none was read: the partition must not be ready to send yet.
    assert part not in ready


async def test_a_regained_partition_matches_a_re_read_ack_of_a_message_this_worker_had_finished(
    inturn_topics: KafkaSettings, test_id: str
) -> None:
    """The worker owned the partition, saw room-0#3 acked, lost the partition before the cursor reached
    PostgreSQL (a broker restart: events unconfirmed, session lost) and gets the partition back. The ack it
    re-reads is the only proof room-0#3 is done: it must resolve room-0#3 when the room comes to it again,
    not be dropped as a duplicate of what the worker remembers (found by the fault matrix's broker row:
    rooms of a regained partition had the acked message and the one in flight both sent again)."""
    settings = WorkerSettings(**inturn_topics.model_dump(), worker_group_id=f"g{test_id}", worker_id="w1")
    partition = partition_for("room-0", settings.topic_partitions)
    ack = ack_of("room-0", 3)
    publish_acks(settings, [ack])
    router = AckRouter(3600)
    # The first ownership: room-0#3 was sent and acked (its future resolved, the router remembers it).
    first = router.expect("room-0", "room-0#3")
    router.sent("room-0", "room-0#3", SendResult("wamid.room-0.3"))
    assert router.route(ack)[0] is Routed.RESOLVED
    assert first.done()
    router.finish(
        "room-0", "room-0#3", "wamid.room-0.3", timed_out=False, partition=partition, offset=3, platform="whatsapp"
    )
    reader = ack_reader(settings, router)
    part = Partition(partition, lease_s=5)
    try:
        reader.assign([part], since_ms=0)  # the partition comes back

        def routed_one() -> bool:
            batch, _ = reader._step()
            for record in batch:
                assert record.error() is None, record.error()
                reader._route(record)
            return bool(batch)

        wait_until(routed_one, 30, "the ack published before the assignment read", every=0)
    finally:
        reader._consumer.close()
    again = router.expect("room-0", "room-0#3")
    assert again.done(), "the re-read ack was dropped: room-0#3 would be sent a second time"
    result = again.result()
    assert result is not None
    assert result.platform_message_id == "wamid.room-0.3"
