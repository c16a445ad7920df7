"""Per platform account: a token bucket (rate limit) and a circuit breaker; and retry backoff.

While a breaker is open, rooms of that account wait; nothing is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved; a sender reserves a token and sleeps its deficit
    (reservations are FIFO: each later one waits longer)."""

    __slots__ = ("_burst", "_rate", "_stamp", "_tokens")

    def __init__(self, rate: float, burst: int) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._stamp = time.monotonic()

    def reserve(self) -> float:
        """Take a token; returns how long to wait before using it (0 when one was available)."""
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._rate


class CircuitBreaker:
    """Closed → open when the failure ratio over a sliding window passes a threshold; open → half-open
    after a pause; half-open lets ``probes`` calls through, closing on their success, reopening on a failure.
    """

    def __init__(self, failure_ratio: float, min_calls: int, window_s: float, open_s: float, probes: int) -> None:
        self._ratio = failure_ratio
        self._min_calls = min_calls
        self._window = window_s
        self._open_s = open_s
        self._probes = probes
        self._calls: deque[tuple[float, bool]] = deque()
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = 0
        self._probe_ok = 0
        self._closed = asyncio.Event()
        self._closed.set()

    @property
    def state(self) -> str:
        """'closed', 'open' or 'half-open'."""
        if self._opened_at is None:
            return "closed"
        return "half-open" if time.monotonic() - self._opened_at >= self._open_s else "open"

    async def admit(self) -> None:
        """Wait until a call may go through (immediately while closed)."""
        while True:
            state = self.state
            if state == "closed":
                return
            if state == "half-open" and self._probing < self._probes:
                self._probing += 1
                return
            assert self._opened_at is not None
            wait = self._opened_at + self._open_s - time.monotonic()
            # Open: wait out the pause. Half-open with every probe slot taken: wait for a probe to settle.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), wait if wait > 0 else self._open_s)

    def record(self, ok: bool) -> None:
        """Record a call's outcome (transient failures count; permanent 4xx do not)."""
        now = time.monotonic()
        if self._opened_at is not None:
            self._probing = max(0, self._probing - 1)
            if not ok:
                self._trip(now)
                return
            self._probe_ok += 1
            if self._probe_ok >= self._probes:
                self._opened_at = None
                self._calls.clear()
                self._failures = 0
                self._closed.set()
            return
        calls = self._calls
        calls.append((now, ok))
        if not ok:
            self._failures += 1
        horizon = now - self._window
        while calls and calls[0][0] < horizon:
            if not calls.popleft()[1]:
                self._failures -= 1
        if len(calls) >= self._min_calls and self._failures / len(calls) >= self._ratio:
            self._trip(now)

    def _trip(self, now: float) -> None:
        self._opened_at = now
        self._probing = 0
        self._probe_ok = 0
        self._closed.clear()


def full_jitter_backoff(attempt: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """AWS-style full jitter: uniform in [0, min(cap, base * 2**attempt)] (attempt counts from 0)."""
    return rng.uniform(0.0, min(cap_s, base_s * (2**attempt)))
