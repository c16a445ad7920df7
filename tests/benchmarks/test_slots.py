"""The gate in front of the aiohttp baseline's connection pool: capacity, first-come first-served, cancellation."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.slots import Slots


async def _settle() -> None:
    """Let every task that can run do so (each hop of a handed-over slot takes one loop turn)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_waiters_get_slots_in_the_order_they_asked() -> None:
    gate = Slots(2)
    order: list[int] = []
    release = [asyncio.Event() for _ in range(6)]

    async def holder(i: int) -> None:
        async with gate:
            order.append(i)
            await release[i].wait()

    tasks = []
    for i in range(6):
        tasks.append(asyncio.create_task(holder(i)))
        await asyncio.sleep(0)  # each asks before the next one
    await _settle()
    assert order == [0, 1]
    assert gate.free == 0
    assert gate.waiting == 4
    for i in (1, 0, 3, 2, 5, 4):  # holders leave out of order; waiters still enter in order
        release[i].set()
        await _settle()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4, 5]
    assert gate.free == 2
    assert gate.waiting == 0


async def _held_with_two_waiting() -> tuple[Slots, asyncio.Task[None], asyncio.Task[None]]:
    """A one-slot gate, held, and two waiters queued in order."""
    gate = Slots(1)
    await gate.acquire()
    first = asyncio.create_task(gate.acquire())
    second = asyncio.create_task(gate.acquire())
    await _settle()
    return gate, first, second


async def test_a_waiter_cancelled_while_waiting_gives_up_its_place_and_holds_nothing() -> None:
    gate, waiter, after = await _held_with_two_waiting()
    waiter.cancel()
    await _settle()
    assert waiter.cancelled()
    gate.release()  # skips the cancelled waiter, hands the slot to the one behind it
    await _settle()
    assert after.done()
    assert not after.cancelled()
    assert gate.free == 0
    gate.release()
    assert gate.free == 1
    assert gate.waiting == 0


async def test_a_waiter_cancelled_after_its_slot_was_handed_over_passes_the_slot_on() -> None:
    gate, first, second = await _held_with_two_waiting()
    gate.release()  # hands the slot to `first`, which has not run yet...
    first.cancel()  # ...and is cancelled before it does
    await _settle()
    assert first.cancelled()
    assert second.done()  # the slot went on, it was not lost
    assert not second.cancelled()
    gate.release()
    assert gate.free == 1


async def test_releasing_a_slot_nobody_holds_is_an_error() -> None:
    gate = Slots(2)
    await gate.acquire()
    gate.release()
    with pytest.raises(RuntimeError, match="not held"):
        gate.release()


def test_a_gate_needs_a_slot() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        Slots(0)


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 5),
    holders=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_never_more_holders_than_slots_and_every_slot_comes_back(size: int, holders: int, seed: int) -> None:
    """Holders that hold for random turns, some cancelled at random moments: the count of concurrent holders
    never exceeds the size, every holder not cancelled gets in, and all slots are free at the end."""
    rng = random.Random(seed)

    async def scenario() -> None:
        gate = Slots(size)
        inside = 0
        peak = 0
        entered: set[int] = set()

        async def holder(i: int, turns: int) -> None:
            nonlocal inside, peak
            async with gate:
                inside += 1
                peak = max(peak, inside)
                entered.add(i)
                try:
                    for _ in range(turns):
                        await asyncio.sleep(0)
                finally:  # a holder may be cancelled inside, too
                    inside -= 1

        tasks = [asyncio.create_task(holder(i, rng.randint(0, 3))) for i in range(holders)]
        doomed = set(rng.sample(range(holders), rng.randint(0, holders // 2)))
        for _ in range(rng.randint(0, 4)):
            await asyncio.sleep(0)
        for i in doomed:
            tasks[i].cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert peak <= size
        for i, result in enumerate(results):
            if not isinstance(result, asyncio.CancelledError):
                assert result is None
                assert i in entered
        assert inside == 0
        assert gate.free == size
        assert gate.waiting == 0

    asyncio.run(scenario())
