"""The small structures under the room loops: ack deadlines on one timer, and a room's entry queue."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from inturn_worker.partition import PartitionState
from inturn_worker.room import Entry, EntryQueue
from inturn_worker.timeouts import Deadlines


def _recorder(fired: list[str], name: str) -> Callable[[asyncio.Future[Any]], None]:
    return lambda _: fired.append(name)


async def test_deadlines_resolve_in_time_order_and_a_cancelled_one_never_fires() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    fired: list[str] = []
    futures: dict[str, asyncio.Future[Any]] = {}
    # Added out of order: the later-added, earlier deadline must re-arm the one timer.
    for name, delay in (("slow", 0.30), ("fast", 0.05), ("cancelled", 0.10), ("middle", 0.15)):
        future: asyncio.Future[Any] = loop.create_future()
        future.add_done_callback(_recorder(fired, name))
        futures[name] = future
        handle = deadlines.add(delay, future)
        if name == "cancelled":
            deadlines.cancel(handle)
    await asyncio.wait_for(futures["slow"], 5)
    assert fired == ["fast", "middle", "slow"]
    assert not futures["cancelled"].done()
    assert futures["fast"].result() is None


async def test_a_deadline_leaves_an_already_resolved_future_alone() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    acked: asyncio.Future[Any] = loop.create_future()
    deadlines.add(0.02, acked)
    acked.set_result("ack")
    later: asyncio.Future[Any] = loop.create_future()
    deadlines.add(0.05, later)
    await asyncio.wait_for(later, 5)
    assert acked.result() == "ack"


def _entry(part: PartitionState, offset: int) -> Entry:
    return Entry(part, offset, b"{}", "room", f"m{offset}", "whatsapp", 0, None, 0)


def test_entry_queue_keeps_offset_order_through_appends_pops_and_removals() -> None:
    a, b = PartitionState(0, 5.0), PartitionState(1, 5.0)
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
