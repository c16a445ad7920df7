"""inturn.deadlines: many deadlines on one loop timer (the worker's ack and idle waits, the webhook's
confirmations, the platform transport's request timeouts)."""

from __future__ import annotations

import asyncio
from typing import Any

from inturn.deadlines import COMPACT_MIN, Deadlines, expire_future


async def test_deadlines_fire_in_time_order_and_a_cancelled_one_never_fires() -> None:
    deadlines = Deadlines()
    fired: list[str] = []
    last: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    # Added out of order: the later-added, earlier deadline must re-arm the one timer.
    for name, delay in (("slow", 0.30), ("fast", 0.05), ("cancelled", 0.10), ("middle", 0.15)):
        deadline = deadlines.add(delay, fired.append, name)
        if name == "cancelled":
            deadlines.cancel(deadline)
    deadlines.add(0.31, expire_future, last)
    await asyncio.wait_for(last, 5)
    assert fired == ["fast", "middle", "slow"]
    assert last.result() is None


async def test_expire_future_leaves_an_already_resolved_future_alone() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    acked: asyncio.Future[Any] = loop.create_future()
    deadlines.add(0.02, expire_future, acked)
    acked.set_result("ack")
    later: asyncio.Future[Any] = loop.create_future()
    deadlines.add(0.05, expire_future, later)
    await asyncio.wait_for(later, 5)
    assert acked.result() == "ack"


async def test_deadlines_of_one_length_added_in_order_fire_in_that_order() -> None:
    """The webhook's and the transport's use: every deadline the same length, so each goes at the heap's end."""
    deadlines = Deadlines()
    fired: list[int] = []
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    for n in range(50):
        deadlines.add(0.05, fired.append, n)
    deadlines.add(0.05, expire_future, done)
    await asyncio.wait_for(done, 5)
    assert fired == list(range(50))


async def test_cancelled_deadlines_do_not_stay_in_the_heap_until_their_time_and_live_ones_still_fire() -> None:
    """Every message adds a deadline and cancels it once acked: the heap must not keep one per message of the last
    ack timeout, and a cancelled deadline lets go of its target at once."""
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    live: asyncio.Future[Any] = loop.create_future()
    deadlines.add(0.2, expire_future, live)
    for _ in range(10 * COMPACT_MIN):
        deadlines.cancel(deadlines.add(30, expire_future, loop.create_future()))
    assert len(deadlines) < 2 * COMPACT_MIN
    kept = deadlines.add(30, expire_future, loop.create_future())
    deadlines.cancel(kept)
    assert kept[3] is None  # the target is not kept alive by a cancelled deadline
    fired: asyncio.Future[Any] = loop.create_future()
    deadline = deadlines.add(0.05, expire_future, fired)
    await asyncio.wait_for(fired, 5)
    deadlines.cancel(deadline)  # after it fired: allowed, and it changes nothing
    deadlines.cancel(None)  # no deadline: nothing to do
    await asyncio.wait_for(live, 5)
    assert live.result() is None
    assert len(deadlines) < 2 * COMPACT_MIN


async def test_a_callback_that_raises_does_not_stop_the_deadlines_after_it() -> None:
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        deadlines = Deadlines()

        def broken(_: object) -> None:
            raise RuntimeError("a broken callback")

        deadlines.add(0.02, broken, None)
        after: asyncio.Future[Any] = loop.create_future()
        deadlines.add(0.08, expire_future, after)
        await asyncio.wait_for(after, 5)
    finally:
        loop.set_exception_handler(None)
    assert after.result() is None
    assert [type(e.get("exception")) for e in errors] == [RuntimeError]


async def test_close_forgets_every_deadline_or_expires_each_one_still_waiting() -> None:
    loop = asyncio.get_running_loop()
    quiet, expiring = Deadlines(), Deadlines()
    fired: list[str] = []
    quiet.add(0.01, fired.append, "quiet")
    later = expiring.add(20, fired.append, "later")
    expiring.add(10, fired.append, "sooner")
    expiring.cancel(expiring.add(5, fired.append, "cancelled"))
    quiet.close()
    expiring.close(expire=True)
    assert fired == ["sooner", "later"]
    assert later[2] is None
    assert len(quiet) == len(expiring) == 0
    # A deadline added after the close fires; the closed one, due well before it, did not.
    after: asyncio.Future[Any] = loop.create_future()
    quiet.add(0.05, expire_future, after)
    await asyncio.wait_for(after, 5)
    assert fired == ["sooner", "later"]
