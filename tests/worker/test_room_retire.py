"""A room's loop retires as soon as the room has nothing to send, and what it owed the partition stays owed.

After an ack timeout the room's next send must wait until the timed-out message's cursor is in PostgreSQL (a new
owner of the partition would otherwise send that message again as well as the next one: invariant 4). That next
message may come after the loop retired, so the wait cannot be a memory of the loop: it is read from the
partition's pending cursor changes.
"""

from __future__ import annotations

import asyncio
import time

from inturn.platforms import SendResult
from inturn.schemas import EventType, Message, encode, now_ms
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import eventually
from inturn_worker.acks import AckRouter
from inturn_worker.partition import Entry, Partition
from inturn_worker.room import Rooms
from tests.worker.test_room_state_machine import Platform, Recorder, rooms_of


def _enqueue(rooms: Rooms, part: Partition, offset: int) -> None:
    msg = Message(
        room_id="R", message_id=f"m{offset}", platform="whatsapp", recipient="r", payload={}, created_at_ms=now_ms()
    )
    part.consumed(offset)
    rooms.enqueue(Entry.of(part, offset, encode(msg), msg, now_ms()))


async def test_after_an_ack_timeout_a_retired_rooms_next_message_waits_for_the_cursor_to_be_durable() -> None:
    platform, recorder = Platform(), Recorder()
    wanted = asyncio.Event()  # what a room sets to ask the checkpoint for a round at once
    part = Partition(0, lease_s=3600, durability_wanted=wanted)
    part.claimed(1)
    part.durable([], 0, time.monotonic())  # a lease, as a checkpoint round grants one
    part.acks_caught_up()
    settings = WorkerSettings(worker_ack_timeout_ms=50, worker_adaptive_timeout=False)
    assert settings.worker_room_idle_ms == 0  # the default: a loop retires at once
    rooms = rooms_of(settings, part, platform, recorder, AckRouter(3600))

    _enqueue(rooms, part, 0)
    await eventually(lambda: platform.pending is not None, 5, "m0 sent")
    assert platform.pending is not None
    platform.pending[1].set_result(SendResult("wamid-m0"))
    await eventually(lambda: "R" not in part.rooms, 5, "m0 timed out and the room's loop retired")
    assert recorder.events == [(EventType.ACK_TIMEOUT, "m0")]
    assert part.awaits_durable("R")

    _enqueue(rooms, part, 1)
    await eventually(wanted.is_set, 5, "the room asked for a checkpoint round")
    for _ in range(20):  # every step the room's new loop can take without the round
        await asyncio.sleep(0)
    assert platform.pending is None, "m1 was sent before m0's cursor was durable"

    written, upto = part.pending()
    part.durable(written, upto, time.monotonic())  # the round wrote m0's cursor
    await eventually(lambda: platform.pending is not None, 5, "m1 sent once m0's cursor is durable")
    assert platform.pending is not None
    assert platform.pending[0] == "m1"
    assert not part.awaits_durable("R")
