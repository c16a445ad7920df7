"""When checkpoint rounds run: periodically, and at once for a room that waits for its cursor to be durable."""

from __future__ import annotations

import asyncio
import time

from inturn.db.store import Checked, CursorUpdate
from inturn.settings.worker import WorkerSettings
from inturn_worker.checkpoint import Checkpoint
from inturn_worker.partition import Partition


def _checkpoint(flush_ms: int) -> Checkpoint:
    # next_round reads only the clock and the partitions' requests.
    return Checkpoint(WorkerSettings(worker_cursor_flush_ms=flush_ms), {}, _CountedRooms(), _Confirmed(), _Written())


async def test_a_room_waiting_for_durability_gets_a_round_at_once_not_after_the_interval() -> None:
    checkpoint = _checkpoint(flush_ms=600_000)
    checkpoint._last_round = time.monotonic()  # a round just began: the next periodic one is 10 minutes away
    due = asyncio.create_task(checkpoint.next_round())
    await asyncio.sleep(0)
    assert not due.done()
    part = Partition(0, lease_s=60, durability_wanted=checkpoint.wanted)
    part.consumed(0)
    part.finished("R", 0, "m0", "ack_timeout")
    durable = asyncio.create_task(part.wait_durable())  # the room's next message waits for m0's cursor
    await asyncio.wait_for(due, 10)
    assert not durable.done(), "durable only once a round that began after the request succeeded"
    written, upto = part.pending()  # what the round does: reads the partition's changes, writes them
    assert [(u.room_id, u.offset, u.outcome) for u in written] == [("R", 0, "ack_timeout")]
    part.durable(written, upto, time.monotonic())
    assert part.pending() == ([], 1)
    await asyncio.wait_for(durable, 10)


async def test_without_a_request_the_next_round_waits_for_the_interval() -> None:
    checkpoint = _checkpoint(flush_ms=600_000)
    checkpoint._last_round = time.monotonic()
    due = asyncio.create_task(checkpoint.next_round())
    for _ in range(100):
        await asyncio.sleep(0)
    assert not due.done()
    checkpoint._last_round -= 600  # the interval has passed
    due.cancel()
    await asyncio.wait_for(checkpoint.next_round(), 10)


class _Confirmed:
    def __init__(self) -> None:
        self.hurried: list[bool] = []

    async def confirm(self, wait_s: float, hurry: bool = False) -> bool:
        self.hurried.append(hurry)
        return True

    def poll(self) -> None:
        pass


class _Written:
    async def claim(self, partitions: list[int], owner: str) -> dict[int, int]:
        return {}

    async def checkpoint(self, updates: list[CursorUpdate], epochs: dict[int, int], owner: str) -> Checked:
        return Checked(set(), {})


class _CountedRooms:
    """Counts the walks over every room the gauges take."""

    def __init__(self) -> None:
        self.walks = 0

    @property
    def active(self) -> int:
        self.walks += 1
        return 0

    def stuck(self) -> int:
        self.walks += 1
        return 0


async def test_rounds_walk_every_room_for_the_gauges_at_most_once_a_second() -> None:
    rooms = _CountedRooms()
    part = Partition(0, lease_s=60)
    part.claimed(1)
    checkpoint = Checkpoint(
        WorkerSettings(worker_cursor_flush_ms=10),
        {0: part},
        rooms,
        _Confirmed(),
        _Written(),
    )
    for _ in range(20):  # rounds back to back (after ack timeouts they come at once)
        assert await checkpoint.once() is not None
    assert rooms.walks == 2, "the first round publishes the gauges, the next 19 within the same second do not"
    checkpoint._gauges_at -= 1.0  # a second has passed
    await checkpoint.once()
    assert rooms.walks == 4


async def test_a_round_a_room_waits_for_hurries_the_events_and_a_periodic_round_does_not() -> None:
    """A room after an ack timeout waits for a round (``Partition.wait_durable``): that round has the producer send
    the events it holds back at once; the periodic rounds leave the producer to batch them."""
    part = Partition(0, lease_s=60, durability_wanted=None)
    part.claimed(1)
    events = _Confirmed()
    checkpoint = Checkpoint(
        WorkerSettings(worker_cursor_flush_ms=10),
        {0: part},
        _CountedRooms(),
        events,
        _Written(),
    )
    await checkpoint.once()
    checkpoint.wanted.set()  # what Partition.wait_durable does
    await checkpoint.once()
    await checkpoint.once()
    assert events.hurried == [False, True, False]
