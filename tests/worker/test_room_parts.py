"""The small structures under the room loops: a room's entry queue, the event log's records."""

from __future__ import annotations

import orjson

from inturn.kafka import make_producer
from inturn.schemas import Event, EventType, OrderingMode, decode
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_worker.events import EventLog
from inturn_worker.partition import Entry, EntryQueue, Partition
from tests.worker.harness import read_topic


def _entry(part: Partition, offset: int) -> Entry:
    return Entry(part, offset, b"{}", "room", f"m{offset}", "whatsapp", 0, None, 0)


def test_entry_queue_keeps_offset_order_through_appends_pops_and_removals() -> None:
    a, b = Partition(0, 5.0), Partition(1, 5.0)
    queue = EntryQueue()
    assert not queue
    assert queue.head is None
    assert len(queue) == 0
    for offset, part in ((1, a), (2, b), (3, a), (4, b), (5, a)):
        queue.append(_entry(part, offset))
    assert [e.offset for e in queue] == [1, 2, 3, 4, 5]
    assert len(queue) == 5
    assert queue.popleft().offset == 1
    queue.remove_if(lambda e: e.part is b)
    assert [e.offset for e in queue] == [3, 5]
    assert len(queue) == 2
    queue.append(_entry(b, 6))
    assert [queue.popleft().offset for _ in range(3)] == [3, 5, 6]
    assert not queue
    assert queue.head is None


async def test_an_event_record_carries_every_field_of_the_event_schema(inturn_topics: KafkaSettings) -> None:
    settings = WorkerSettings(**inturn_topics.model_dump(include=set(KafkaSettings.model_fields)), worker_id="w-7")
    log = EventLog(make_producer(settings), settings, {settings.topic_events: 4, settings.topic_dlq: 4})
    log.emit(
        EventType.ACKED,
        "room-1",
        "room-1#9",
        "whatsapp",
        2,
        41,
        attempt=3,
        created_at_ms=1,
        consumed_at_ms=2,
        sent_at_ms=3,
        acked_at_ms=4,
        platform_message_id="wamid.9",
        detail="sent",
    )
    assert await log.confirm(wait_s=20)
    (raw,) = read_topic(settings, settings.topic_events, expect=1)
    assert set(orjson.loads(raw)) == set(Event.__struct_fields__)  # written whole, not left to the model's defaults
    event = decode(Event, raw)
    assert (event.type, event.room_id, event.message_id, event.platform, event.partition, event.offset) == (
        EventType.ACKED,
        "room-1",
        "room-1#9",
        "whatsapp",
        2,
        41,
    )
    assert (event.attempt, event.worker_id, event.mode) == (3, "w-7", OrderingMode.ACK)
    assert (event.created_at_ms, event.consumed_at_ms, event.sent_at_ms, event.acked_at_ms) == (1, 2, 3, 4)
    assert (event.platform_message_id, event.detail) == ("wamid.9", "sent")
    assert event.ts_ms >= 4


async def test_a_checkpoint_a_room_waits_for_has_the_lingering_events_sent_at_once(
    inturn_topics: KafkaSettings,
) -> None:
    """After an ack timeout the room's next send waits for a checkpoint round, whose first step is confirming the
    events produced so far. The producer lingers to batch them; a round a room waits for must not wait that out."""
    settings = WorkerSettings(**inturn_topics.model_dump(include=set(KafkaSettings.model_fields)), worker_id="w-1")
    producer = make_producer(settings, **{"linger.ms": 60_000})  # held back far longer than the test runs
    log = EventLog(producer, settings, {settings.topic_events: 4, settings.topic_dlq: 4})
    log.emit(EventType.ACK_TIMEOUT, "room-1", "room-1#1", "whatsapp", 0, 1, detail="no ack")
    assert producer.flush(20) == 0  # the first one connects the producer; what follows is about lingering only
    assert await log.confirm(wait_s=1)
    log.emit(EventType.ACK_TIMEOUT, "room-1", "room-1#2", "whatsapp", 0, 2, detail="no ack")
    assert not await log.confirm(wait_s=1.5), "without hurry the event lingers (the producer's batching)"
    assert await log.confirm(wait_s=20, hurry=True), "a hurried confirm still waited for the linger"
    assert len(read_topic(settings, settings.topic_events, expect=2)) == 2
