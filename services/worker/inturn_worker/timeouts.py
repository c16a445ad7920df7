"""Ack timeouts per platform: fixed from settings, or learned from observed ack latency.

The adaptive timeout is a high quantile of recent ack latencies times a factor, clamped. It
lets rooms stall less when acks go missing while staying well above normal latency. Timed-out
messages do not feed it (their latency is unknown), so it cannot collapse onto itself.
"""

from __future__ import annotations

import bisect
from collections import deque


class AckTimeout:
    """The ack timeout in force for one platform."""

    def __init__(
        self,
        fixed_s: float,
        adaptive: bool = False,
        quantile: float = 0.99,
        factor: float = 3.0,
        min_s: float = 0.5,
        max_s: float = 30.0,
        window: int = 2048,
        warmup: int = 50,
    ) -> None:
        self._fixed = fixed_s
        self._adaptive = adaptive
        self._quantile = quantile
        self._factor = factor
        self._min = min_s
        self._max = max_s
        self._warmup = warmup
        self._recent: deque[float] = deque(maxlen=window)
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
