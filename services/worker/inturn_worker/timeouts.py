"""Ack timeouts per platform: fixed from settings, or learned from observed ack latency.

The adaptive timeout is a high quantile of recent ack latencies times a factor, clamped. It
lets rooms stall less when acks go missing while staying well above normal latency. Timed-out
messages do not feed it (their latency is unknown), so it cannot collapse onto itself.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass
from typing import Any

from inturn.metrics import worker as m
from inturn.settings.worker import WorkerSettings


@dataclass(frozen=True, slots=True)
class Adaptive:
    """How an adaptive timeout is learned: ``factor`` times the ``quantile`` of the last ``window`` latencies,
    clamped to [``min_s``, ``max_s``], once ``warmup`` latencies were seen."""

    quantile: float = 0.99
    factor: float = 3.0
    min_s: float = 0.5
    max_s: float = 30.0
    window: int = 2048
    warmup: int = 50


class AckTimeout:
    """The ack timeout in force for one platform: ``fixed_s``, or learned (``adaptive``) once enough acks came."""

    def __init__(self, fixed_s: float, adaptive: Adaptive | None = None) -> None:
        policy = adaptive or Adaptive()
        self._adaptive = adaptive is not None
        self._quantile = policy.quantile
        self._factor = policy.factor
        self._min = policy.min_s
        self._max = policy.max_s
        self._warmup = policy.warmup
        self._recent: deque[float] = deque(maxlen=policy.window)
        self._sorted: list[float] = []
        self._current = fixed_s

    def observe(self, latency_s: float) -> None:
        """Feed one observed ack latency (send returned → ack received)."""
        if not self._adaptive:
            return
        if len(self._recent) == self._recent.maxlen:
            old = self._recent[0]
            del self._sorted[bisect.bisect_left(self._sorted, old)]
        self._recent.append(latency_s)
        bisect.insort(self._sorted, latency_s)
        if len(self._sorted) >= self._warmup:
            q = self._sorted[min(len(self._sorted) - 1, int(self._quantile * len(self._sorted)))]
            self._current = min(self._max, max(self._min, q * self._factor))

    @property
    def seconds(self) -> float:
        """The timeout to use for the next message (the fixed one until enough latencies were seen)."""
        return self._current


#: Cancelled deadlines below which ``Deadlines`` never rebuilds its heap (a rebuild is linear in the heap).
COMPACT_MIN = 4096


class Deadlines:
    """Every waiting message's ack deadline on one loop timer: a heap, re-armed for the earliest deadline.

    A loop timer per message costs about 500 bytes (tens of thousands of rooms wait at once) and a
    schedule and a cancel per message; a heap entry costs a third of that. A cancelled entry lets go of
    its future at once and leaves the heap when its time comes, or earlier: once cancelled entries are
    more than half of the heap, it is rebuilt without them (as asyncio does with its own timers). Without
    that, every message sent in the last ack timeout (10 s by default) kept its entry alive until then.
    """

    def __init__(self) -> None:
        self._heap: list[list[Any]] = []  # [when, sequence, future or None]
        self._sequence = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._cancelled = 0  # entries in the heap whose future is None

    def __len__(self) -> int:
        """Entries in the heap, cancelled ones included."""
        return len(self._heap)

    def add(self, delay_s: float, future: asyncio.Future[Any]) -> list[Any]:
        """Resolve ``future`` with None after ``delay_s`` unless it is done by then; a handle for ``cancel``."""
        loop = asyncio.get_running_loop()
        when = loop.time() + delay_s
        entry: list[Any] = [when, next(self._sequence), future]
        heapq.heappush(self._heap, entry)
        if when < self._timer_at:
            self._arm(loop, when)
        return entry

    def cancel(self, entry: list[Any]) -> None:
        """Forget the deadline (its entry leaves the heap at its time, or at the next rebuild)."""
        if entry[2] is None:
            return
        entry[2] = None
        self._cancelled += 1
        heap = self._heap
        if self._cancelled >= COMPACT_MIN and 2 * self._cancelled > len(heap):
            heap[:] = [kept for kept in heap if kept[2] is not None]
            heapq.heapify(heap)
            self._cancelled = 0

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._fire, loop)
        self._timer_at = when

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._timer_at = None, math.inf
        heap, now = self._heap, loop.time()
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            future = entry[2]
            if future is None:
                self._cancelled -= 1
                continue
            entry[2] = None  # fired: the owner's later ``cancel`` has nothing left to count
            if not future.done():
                future.set_result(None)
        if heap:
            self._arm(loop, heap[0][0])


class AckTimeouts:
    """The ack timeout in force per platform (created on first use from the settings)."""

    def __init__(self, settings: WorkerSettings) -> None:
        self._settings = settings
        self._timeouts: dict[str, AckTimeout] = {}
        self._shown: dict[str, float] = {}

    def of(self, platform: str) -> AckTimeout:
        """``platform``'s timeout; its gauge is set when the value changes, not per send."""
        timeout = self._timeouts.get(platform)
        if timeout is None:
            s = self._settings
            adaptive = Adaptive(
                quantile=s.worker_adaptive_quantile,
                factor=s.worker_adaptive_factor,
                min_s=s.worker_adaptive_min_ms / 1000,
                max_s=s.worker_adaptive_max_ms / 1000,
            )
            timeout = self._timeouts[platform] = AckTimeout(
                s.ack_timeout_ms(platform) / 1000, adaptive if s.worker_adaptive_timeout else None
            )
        seconds = timeout.seconds
        if seconds != self._shown.get(platform):
            self._shown[platform] = seconds
            m.for_platform(platform).ack_timeout_seconds.set(seconds)
        return timeout
