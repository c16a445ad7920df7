"""A new owner reads its partitions' terminal events back before its first send (docs/reliability.md, problem 15).

PostgreSQL restored from an older copy loses the newest room cursors. A message acked in the lost window is still
recognised by its ack, but one that ended by ack timeout (or as a dead letter) has no ack: before the ends reader,
only the lost cursor knew it was done, and a new owner sent it again after newer messages of its room. The
partition now admits no send until the ends are read, and a room's cursor is the newer of PostgreSQL's and theirs.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import structlog
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from structlog.testing import capture_logs

from inturn.kafka import make_producer, partition_for
from inturn.schemas import EventType, Message, encode, now_ms
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import eventually
from inturn_worker import ends
from inturn_worker.acks import AckRouter
from inturn_worker.ends import EndsReader
from inturn_worker.events import EventLog
from inturn_worker.partition import Entry, Partition
from inturn_worker.room import Rooms
from tests.worker.test_room_state_machine import Platform, Recorder, rooms_of


def _enqueue(rooms: Rooms, part: Partition, offset: int) -> None:
    msg = Message(
        room_id="R", message_id=f"m{offset}", platform="whatsapp", recipient="r", payload={}, created_at_ms=now_ms()
    )
    part.consumed(offset)
    rooms.enqueue(Entry.of(part, offset, encode(msg), msg, now_ms()))


@pytest.mark.parametrize(
    ("ends", "first_sent", "skipped"),
    [
        ({"R": 4}, "m5", ["m4"]),  # m4 ended by ack timeout under the previous owner: its event says so
        ({}, "m4", []),  # control: nothing on Kafka says m4 ended, so it is sent
        ({"other-room": 9}, "m4", []),  # another room's end says nothing of this one
    ],
)
async def test_a_message_whose_end_is_on_kafka_but_not_in_postgresql_is_not_sent_again_and_postgresql_learns_it(
    ends: dict[str, int], first_sent: str, skipped: list[str]
) -> None:
    platform, recorder = Platform(), Recorder()
    part = Partition(0, lease_s=3600, ends_pending=True)
    part.claimed(1)
    part.durable([], 0, time.monotonic())  # a lease, as a checkpoint round grants one
    part.acks_caught_up()
    part.cursor_loaded("R", -1, None)  # PostgreSQL went back: it has no cursor of the room
    settings = WorkerSettings(worker_ack_timeout_ms=3_600_000, worker_adaptive_timeout=False)
    rooms = rooms_of(settings, part, platform, recorder, AckRouter(3600))

    _enqueue(rooms, part, 4)
    _enqueue(rooms, part, 5)
    for _ in range(20):  # every step the room's loop can take before the ends are read
        await asyncio.sleep(0)
    assert platform.pending is None, "a send went out before the partition's ends were read back"
    assert recorder.events == []

    part.ends_read(dict(ends))
    await eventually(lambda: platform.pending is not None, 5, "the room's first send")
    assert platform.pending is not None
    assert platform.pending[0] == first_sent
    assert recorder.events == [(EventType.SKIPPED_DUPLICATE, m) for m in skipped]
    # The next checkpoint round writes the cursor the events gave, so a later owner does not depend on the look-back.
    written = [(u.room_id, u.offset, u.message_id, u.outcome) for u in part.pending()[0]]
    assert written == [("R", 4, m, EventType.SKIPPED_DUPLICATE) for m in skipped]


class _NoAcks:
    """The acks reader's part of an assignment, left out: this test reads ends only."""

    def assign(self, parts: list[Partition], since_ms: int) -> None:
        pass

    def unassign(self, parts: list[Partition]) -> None:
        pass


@pytest.fixture
def fresh_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ends reader's logger, not yet used: structlog caches a logger at its first use (``inturn.logs``), and one
    cached before ``capture_logs`` (an in-process worker of an earlier test) would log past it."""
    monkeypatch.setattr(ends, "log", structlog.get_logger("inturn.worker.ends"))


@pytest.mark.usefixtures("fresh_log")
async def test_the_ends_reader_takes_each_rooms_newest_terminal_offset_of_its_partition_from_the_look_back(
    inturn_topics: KafkaSettings,
) -> None:
    settings = WorkerSettings(**inturn_topics.model_dump(include=set(KafkaSettings.model_fields)), worker_id="w-9")
    count = 4
    log = EventLog(make_producer(settings), settings, {settings.topic_events: count, settings.topic_dlq: count})

    def emit(type_: EventType, room: str, partition: int, offset: int) -> None:
        log.emit(type_, room, f"{room}#{offset}", "whatsapp", partition, offset)

    # Before the look-back: not read.
    emit(EventType.ACK_TIMEOUT, "room-old", 1, 7)
    assert await log.confirm(10)
    since = now_ms() + 1
    await eventually(lambda: now_ms() > since, 5, "the clock passed the look-back point")
    # Rooms whose events partition by murmur2 would not be 1: their events follow their messages partition.
    rooms = [f"room-{n}" for n in range(40) if partition_for(f"room-{n}", count) != 1][:5]
    r1, r2, r3, r4, r5 = rooms
    emit(EventType.ACK_TIMEOUT, r1, 1, 5)
    emit(EventType.ACKED, r1, 1, 3)  # read after the newer end: the newest offset stays
    emit(EventType.SKIPPED_DUPLICATE, r2, 1, 9)  # a skip leaves a cursor where it was
    emit(EventType.DEAD_LETTERED, r3, 1, 2)  # an undecodable record is dead-lettered before its room's turn
    emit(EventType.LATE_ACK, r4, 1, 8)  # not an end
    emit(EventType.ACKED, r5, 2, 6)  # another messages partition's
    assert await log.confirm(10)
    garbage: Producer = make_producer(settings)
    garbage.produce(settings.topic_events, value=b"not an event", key=r1, partition=1)
    garbage.flush(10)

    part = Partition(1, lease_s=60, ends_pending=True)
    for room in ["room-old", *rooms]:
        part.cursor_loaded(room, -1, None)
    part.acks_caught_up()
    reader = EndsReader(settings, count, _NoAcks())
    try:
        with capture_logs() as logs:
            reader.assign([part], since)
            await eventually(lambda: part.acks_ready, 30, "the partition's ends read back")
        cursors = {room: part.cursor(room) for room in ["room-old", *rooms]}
        assert cursors == {"room-old": -1, r1: 5, r2: -1, r3: -1, r4: -1, r5: -1}
        read = [e for e in logs if e["event"] == "ends_read"]
        assert [(e["partitions"], e["records"], e["rooms"]) for e in read] == [([1], 6, 1)]
    finally:
        await reader.close()


async def test_a_partition_waiting_for_its_ends_is_not_admitted_and_a_partition_not_asked_to_is() -> None:
    waiting = Partition(0, lease_s=60, ends_pending=True)
    plain = Partition(1, lease_s=60)
    for part in (waiting, plain):
        part.claimed(1)
        part.durable([], 0, time.monotonic())  # a lease, as a checkpoint round grants one
        part.acks_caught_up()
    assert plain.admitted()
    assert not waiting.admitted()
    waiting.ends_read({})
    assert waiting.admitted()


def _admissible(ends_pending: bool = False) -> Partition:
    """A partition with a fresh lease and its acks read up to the assignment."""
    part = Partition(0, lease_s=60, ends_pending=ends_pending)
    part.claimed(1)
    part.durable([], 0, time.monotonic())
    part.acks_caught_up()
    return part


async def test_admitted_asks_each_of_its_conditions_itself() -> None:
    """``admitted`` reads the partition's flags directly (it is asked per message), not through ``gone`` and
    ``acks_ready``: each condition alone still keeps a send out."""
    assert _admissible().admitted()
    revoked, fenced = _admissible(), _admissible()
    revoked.revoke()
    fenced.fence()
    assert not revoked.admitted()
    assert not fenced.admitted()
    no_acks = Partition(0, lease_s=60)
    no_acks.claimed(1)
    no_acks.durable([], 0, time.monotonic())
    assert not no_acks.admitted()  # acks not read up to the assignment
    assert not _admissible(ends_pending=True).admitted()  # ends not read back
    lapsed = Partition(0, lease_s=60)
    lapsed.claimed(1)
    lapsed.durable([], 0, time.monotonic() - 61)  # the last round began longer ago than the lease lasts
    lapsed.acks_caught_up()
    assert not lapsed.admitted()


@pytest.mark.usefixtures("fresh_log")
async def test_a_kafka_error_delays_the_read_back_and_never_admits_the_partition_without_it(
    inturn_topics: KafkaSettings, kafka_admin: AdminClient
) -> None:
    later = f"{inturn_topics.topic_events}.later"  # does not exist yet (the broker creates no topic by itself)
    kafka = inturn_topics.model_dump(include=set(KafkaSettings.model_fields))
    settings = WorkerSettings(**{**kafka, "topic_events": later}, worker_id="w-9")
    part = Partition(0, lease_s=60, ends_pending=True)
    part.acks_caught_up()
    reader = EndsReader(settings, 4, _NoAcks())
    try:
        with capture_logs() as logs:
            reader.assign([part], now_ms() - 60_000)
            await eventually(
                lambda: any(e["event"] == "ends_read_retry" for e in logs), 30, "a failed read-back said so"
            )
            assert not part.acks_ready, "admitted without its ends"
            kafka_admin.create_topics([NewTopic(later, 4, 1)])[later].result(30)
            await eventually(lambda: part.acks_ready, 60, "the partition's ends read back once the topic exists")
        retries = [e for e in logs if e["event"] == "ends_read_retry"]
        assert (retries[0]["partitions"], retries[0]["failures"]) == ([0], 1)
        assert [e["records"] for e in logs if e["event"] == "ends_read"] == [0]
    finally:
        await reader.close()


def test_a_skip_moves_a_cursor_only_up_and_only_for_a_room() -> None:
    part = Partition(0, lease_s=60)
    part.claimed(1)
    for offset in range(10):
        part.consumed(offset)
    part.cursor_loaded("R", 5, None)
    part.skipped(3, "R", "m3")  # at or below PostgreSQL's cursor: done already, nothing to write
    part.skipped(4)  # an undecodable record: no room
    assert part.pending()[0] == []
    part.skipped(7, "R", "m7")  # above it (its end was found on Kafka): the store must learn it
    assert [(u.room_id, u.offset, u.message_id) for u in part.pending()[0]] == [("R", 7, "m7")]
    assert part.cursor("R") == 7
    part.fence()
    part.skipped(9, "R", "m9")  # a fenced partition records nothing
    assert part.cursor("R") == 7
