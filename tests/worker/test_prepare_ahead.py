"""Pipelined preparation: while a room's message awaits its ack, the next ones are rendered; sends stay in order."""

from __future__ import annotations

import asyncio
import sys
import time

from prometheus_client import generate_latest

from inturn.errors import PermanentPlatformError
from inturn.platforms import PreparedSend, SendResult
from inturn.schemas import Message, encode, now_ms
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import eventually
from inturn_worker.acks import AckRouter
from inturn_worker.health import describe
from inturn_worker.partition import Entry, Partition
from inturn_worker.room import Rooms
from tests.support.messages import text_message
from tests.worker.test_room_state_machine import Platform, Recorder, rooms_of


class Counting(Platform):
    """Counts renders; refuses to render message ``m0`` when told to."""

    def __init__(self, refuse_head: bool) -> None:
        super().__init__()
        self.rendered: list[str] = []
        self.refuse_head = refuse_head

    def prepare(self, message: Message, partition: int | None = None) -> PreparedSend:
        self.rendered.append(message.message_id)
        if self.refuse_head and message.message_id == "m0":
            raise PermanentPlatformError("no phone_number_id")
        return super().prepare(message)


def _message(n: int) -> Message:
    return text_message("R", f"m{n}", recipient="r", created_at_ms=1)


def _rooms(platform: Counting, part: Partition, recorder: Recorder | None = None) -> Rooms:
    return rooms_of(WorkerSettings(worker_prepare_ahead=4), part, platform, recorder or Recorder(), AckRouter(60))


def _enqueue(rooms: Rooms, part: Partition, count: int) -> list[Entry]:
    entries = []
    for n in range(count):
        message = _message(n)
        part.consumed(n)
        entry = Entry.of(part, n, encode(message), message, now_ms())
        rooms.enqueue(entry)
        entries.append(entry)
    return entries


async def test_while_the_head_awaits_its_ack_the_next_messages_are_rendered_in_order() -> None:
    platform = Counting(refuse_head=False)
    part = Partition(0, lease_s=60)
    rooms = _rooms(platform, part)
    part.claimed(1)
    part.durable([], 0, time.monotonic())  # a lease, as a checkpoint round grants one
    part.acks_caught_up()
    entries = _enqueue(rooms, part, 7)
    await eventually(lambda: platform.pending is not None, 5, "the room loop got there", every=0)
    assert platform.rendered == ["m0"], "nothing behind the head is rendered before the head's send"
    assert [e.prepared is not None for e in entries[:2]] == [True, False]
    assert platform.pending is not None
    body, answer = platform.pending
    assert body == "m0"
    answer.set_result(SendResult("wamid.0"))
    await eventually(lambda: entries[1].prepared is not None, 5, "the room loop got there", every=0)
    # The head awaits its ack; the 4 messages behind it (INTURN_WORKER_PREPARE_AHEAD) are ready to go.
    assert platform.rendered == ["m0", "m1", "m2", "m3", "m4"]
    assert [e.prepared.body for e in entries[1:5] if isinstance(e.prepared, PreparedSend)] == [
        b"m1",
        b"m2",
        b"m3",
        b"m4",
    ]
    assert entries[0].prepared is None, "a sent message lets go of its body"
    assert [e.prepared for e in entries[5:]] == [None, None]
    await rooms.close()


async def test_a_sent_messages_rendered_send_is_freed_while_it_awaits_its_ack() -> None:
    """Tens of thousands of rooms wait for acks at once: whatever still points at a sent body (an attribute, a
    local of a suspended coroutine) keeps about a kilobyte per room alive."""
    platform = Counting(refuse_head=False)
    recorder = Recorder()
    part = Partition(0, lease_s=60)
    rooms = _rooms(platform, part, recorder)
    part.claimed(1)
    part.durable([], 0, time.monotonic())  # a lease, as a checkpoint round grants one
    part.acks_caught_up()
    (entry,) = _enqueue(rooms, part, 1)
    await eventually(lambda: platform.pending is not None, 5, "the room loop got there", every=0)
    assert isinstance(entry.prepared, PreparedSend)
    rendered = entry.prepared
    assert platform.pending is not None
    _, answer = platform.pending
    answer.set_result(SendResult("wamid.0"))
    await eventually(lambda: platform.pending is None and entry.prepared is None, 5, "the room loop got there", every=0)
    # Only this test's name and getrefcount's argument still refer to the body.
    await eventually(lambda: sys.getrefcount(rendered) == 2, 5, "the room loop let go of the body", every=0)
    assert recorder.events == [], "m0 was sent and still awaits its ack: its one event comes with its outcome"
    assert (describe({0: part}, "R") or {}).get("in_flight") is True
    await rooms.close()


async def test_a_room_counts_as_stuck_after_twice_its_own_platforms_ack_timeout_not_the_default() -> None:
    platform = Counting(refuse_head=False)
    settings = WorkerSettings(worker_ack_timeout_ms=60_000, worker_ack_timeouts_ms={"whatsapp": 100})
    part = Partition(0, lease_s=60)
    rooms = rooms_of(settings, part, platform, Recorder(), AckRouter(early_ttl_s=60))
    part.claimed(1)
    part.durable([], 0, time.monotonic())  # a lease, as a checkpoint round grants one
    part.acks_caught_up()
    _enqueue(rooms, part, 1)
    await eventually(lambda: platform.pending is not None, 5, "the room loop got there", every=0)
    assert rooms.stuck() == 0
    part.rooms["R"].head_since -= 0.15  # waited 150 ms: more than its ack timeout, less than twice
    assert rooms.stuck() == 0
    part.rooms["R"].head_since -= 0.10  # 250 ms: more than twice whatsapp's 100 ms (the default is 60 s)
    assert rooms.stuck() == 1
    await rooms.close()
    # The gauge's help says what is counted here (and what the alert and docs/operations.md say): twice.
    help_line = next(
        line for line in generate_latest().decode().splitlines() if line.startswith("# HELP inturn_worker_stuck_rooms ")
    )
    assert "more than twice its platform's ack timeout" in help_line


async def test_a_rooms_loop_takes_its_next_message_after_a_pause_and_retires_when_idle_long_enough() -> None:
    platform = Counting(refuse_head=False)
    recorder = Recorder()
    part = Partition(0, lease_s=60)
    settings = WorkerSettings(worker_mode="none", worker_room_idle_ms=300)  # no ack wait: sent is terminal
    rooms = rooms_of(settings, part, platform, recorder, AckRouter(early_ttl_s=60))
    part.claimed(1)
    part.durable([], 0, time.monotonic())  # a lease, as a checkpoint round grants one
    part.acks_caught_up()
    (first,) = _enqueue(rooms, part, 1)
    await eventually(lambda: platform.pending is not None, 5, "the room loop got there", every=0)
    assert platform.pending is not None
    platform.pending[1].set_result(SendResult("wamid.0"))
    await eventually(
        lambda: part.rooms["R"].wakeup is not None, 5, "the room loop got there", every=0
    )  # m0 done: the loop waits for the room's next one
    loop_task = part.rooms["R"].task
    message = _message(1)
    part.consumed(1)
    rooms.enqueue(Entry.of(part, 1, encode(message), message, now_ms()))
    await eventually(lambda: platform.pending is not None, 5, "the room loop got there", every=0)
    assert part.rooms["R"].task is loop_task, "the same loop took the next message: no task per message"
    assert platform.pending is not None
    platform.pending[1].set_result(SendResult("wamid.1"))
    assert loop_task is not None
    await asyncio.wait_for(loop_task, 10)  # retires after 300 ms with nothing to send
    assert "R" not in part.rooms
    assert [mid for _, mid in recorder.events] == ["m0", "m1"]
    assert first.offset == 0
    await rooms.close()
