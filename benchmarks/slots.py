"""A first-come, first-served gate in front of an HTTP client's connection pool: what the platform adapters put
in front of aiohttp's client until their own transport (whose line does this job) replaced it, kept for the
aiohttp baseline of ``benchmarks/bare_post.py`` so that it measures aiohttp as the worker used it.

``asyncio.Semaphore`` finds the next waiter to wake by scanning its queue from the front past every
waiter already woken but not yet run, and each woken waiter removes itself from the middle of that
queue (``deque.remove``, a scan too). With thousands of rooms queued for a pool of a few hundred
connections, every release paid for the whole queue: 40 ``Future.done`` calls per delivered message
under the worker benchmark's load. Here a release hands its slot straight to the waiter at the head
of the queue, which is popped, not searched: constant work per acquire and release.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType


class Slots:
    """At most ``size`` holders at once; waiters get a slot in the order they asked for one."""

    __slots__ = ("_free", "_size", "_waiters")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a gate needs at least one slot, not {size}")
        self._size = size
        self._free = size
        # A waiter's future is resolved when a slot is handed to it; a cancelled waiter stays here until a
        # release pops and skips it. Whenever a slot is free this queue is empty.
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def free(self) -> int:
        """Slots nobody holds or has been handed."""
        return self._free

    @property
    def waiting(self) -> int:
        """Waiters still in the queue (cancelled ones included until a release skips them)."""
        return len(self._waiters)

    async def acquire(self) -> None:
        """Take a slot, waiting in line when none is free."""
        if self._free:
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # a slot was handed over as the waiter was cancelled: pass it on
            raise

    def release(self) -> None:
        """Give the slot back: to the first waiter still waiting, else to the pool."""
        waiters = self._waiters
        while waiters:
            future = waiters.popleft()
            if not future.done():
                future.set_result(None)
                return
        if self._free >= self._size:
            raise RuntimeError("released a slot that was not held")
        self._free += 1

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
