"""Many deadlines on one event-loop timer: the worker's ack and idle waits, the webhook's Kafka confirmations and
the platform transport's request timeouts.

A loop timer per deadline costs a ``TimerHandle`` (about 500 bytes with its callback), a schedule and a cancel;
tens of thousands wait at once in the worker. Here a deadline is a small list in one heap, and one timer is armed
for the earliest. When it fires, every deadline that is due is expired (its callback called with its target) and
the timer is armed again for the next one.

A cancelled deadline lets go of its target at once and leaves the heap when its time comes, or earlier: once
cancelled deadlines are more than half of the heap (and at least ``COMPACT_MIN``), the heap is rebuilt without
them, as asyncio does with its own timers. Deadlines of one length added in order (the webhook's, the
transport's) go on at the heap's end without moving anything.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Cancelled deadlines below which the heap is never rebuilt (a rebuild is linear in the heap).
COMPACT_MIN = 4096

#: One deadline: [when (loop time), sequence, callback or None, target or None]. A list, compared by the heap in C
#: (when, then the sequence); callback and target are None once it is cancelled or has fired.
Deadline = list[Any]


def expire_future(future: asyncio.Future[Any]) -> None:
    """A deadline's callback for a waiter on ``future``: it ends with None unless it is done by then."""
    if not future.done():
        future.set_result(None)


class Deadlines:
    """Deadlines on one loop timer: ``add`` one, ``cancel`` it when its wait ended in time."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop  # the running loop of the first ``add`` when not given
        self._heap: list[Deadline] = []
        self._sequence = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._cancelled = 0  # deadlines in the heap that were cancelled

    def __len__(self) -> int:
        """Deadlines in the heap, cancelled ones not yet dropped included."""
        return len(self._heap)

    def add(self, delay_s: float, expire: Callable[[T], object], target: T) -> Deadline:
        """Call ``expire(target)`` ``delay_s`` from now unless the deadline is cancelled before; the deadline."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        when = loop.time() + delay_s
        deadline: Deadline = [when, next(self._sequence), expire, target]
        heapq.heappush(self._heap, deadline)
        if when < self._timer_at:
            self._arm(loop, when)
        return deadline

    def cancel(self, deadline: Deadline | None) -> None:
        """Forget ``deadline`` (nothing happens when it already fired or was cancelled, or is None)."""
        if deadline is None or deadline[2] is None:
            return
        deadline[2] = deadline[3] = None
        self._cancelled += 1
        heap = self._heap
        if self._cancelled >= COMPACT_MIN and 2 * self._cancelled > len(heap):
            heap[:] = [kept for kept in heap if kept[2] is not None]
            heapq.heapify(heap)
            self._cancelled = 0

    def close(self, expire: bool = False) -> None:
        """Stop the timer and forget every deadline; with ``expire``, each one not cancelled expires now (in order)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = None, math.inf
        heap, self._heap = self._heap, []
        self._cancelled = 0
        if expire:
            for deadline in sorted(heap):
                callback, target = deadline[2], deadline[3]
                if callback is not None:
                    deadline[2] = deadline[3] = None
                    callback(target)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._fire, loop)
        self._timer_at = when

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._timer_at = None, math.inf
        heap, now = self._heap, loop.time()
        try:
            while heap and heap[0][0] <= now:
                deadline = heapq.heappop(heap)
                callback, target = deadline[2], deadline[3]
                if callback is None:
                    self._cancelled -= 1
                    continue
                deadline[2] = deadline[3] = None  # fired: a later ``cancel`` has nothing left to count
                callback(target)
        finally:  # a callback that raised leaves the rest armed (the loop reports the error)
            if heap and heap[0][0] < self._timer_at:
                self._arm(loop, heap[0][0])
