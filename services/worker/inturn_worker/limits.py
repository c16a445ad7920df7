"""Sending one message: per platform account a token bucket (rate limit) and a circuit breaker, and
retries of transient failures with equal-jitter backoff (Retry-After honoured).

While a breaker is open, rooms of that account wait; nothing is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from inturn.errors import PermanentPlatformError, TransientPlatformError
from inturn.metrics import worker as m
from inturn.platforms import PlatformAdapter, PreparedSend, RequestWithdrawn, SendResult
from inturn.schemas import Ack, EventType, now_ms
from inturn.settings.worker import WorkerSettings
from inturn_worker.events import EventLog
from inturn_worker.partition import Entry, PartitionGone


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved; a sender reserves a token and sleeps its deficit
    (reservations are FIFO: each later one waits longer)."""

    __slots__ = ("_burst", "_clock", "_rate", "_stamp", "_tokens")

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._stamp = clock()

    def reserve(self) -> float:
        """Take a token; returns how long to wait before using it (0 when one was available)."""
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._rate


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """When a circuit breaker opens (``failure_ratio`` of at least ``min_calls`` calls over ``window_s``), how long
    it stays open, and how many probe calls it lets through half-open."""

    failure_ratio: float
    min_calls: int
    window_s: float
    open_s: float
    probes: int

    @classmethod
    def of(cls, settings: WorkerSettings) -> BreakerPolicy:
        """The policy the settings give (``INTURN_WORKER_BREAKER_*``)."""
        return cls(
            settings.worker_breaker_failure_ratio,
            settings.worker_breaker_min_calls,
            settings.worker_breaker_window_s,
            settings.worker_breaker_open_s,
            settings.worker_breaker_probes,
        )


class CircuitBreaker:
    """Closed → open when the failure ratio over a sliding window passes a threshold; open → half-open
    after a pause; half-open lets ``probes`` calls through, closing on their success, reopening on a failure.
    """

    def __init__(self, policy: BreakerPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._ratio = policy.failure_ratio
        self._min_calls = policy.min_calls
        self._window = policy.window_s
        self._open_s = policy.open_s
        self._probes = policy.probes
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
        return "half-open" if self._clock() - self._opened_at >= self._open_s else "open"

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
            wait = self._opened_at + self._open_s - self._clock()
            # Open: wait out the pause. Half-open with every probe slot taken: wait for a probe to settle.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), wait if wait > 0 else self._open_s)

    def record(self, ok: bool) -> None:
        """Record a call's outcome (transient failures count; permanent 4xx do not)."""
        now = self._clock()
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


def equal_jitter_backoff(attempt: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Equal jitter: uniform in [d/2, d] with d = min(cap, base * 2**attempt) (attempt counts from 0).

    Half of each delay is fixed, so the attempts span at least half the doubling sum (8 attempts at base 200 ms: at
    least 12.7 s). Full jitter (uniform in [0, d]) spreads retries as well but may draw every delay near 0: with those
    settings about 3 messages in 1,000 retried through a 3 s burst of 5xx ran out of attempts and were dead-lettered
    (docs/reliability.md, problem 14)."""
    bound: float = min(cap_s, base_s * 2.0**attempt)
    return bound / 2 + rng.uniform(0.0, bound / 2)


class SendFailed(Exception):
    """A permanent failure of one message; what is known of its send goes into its terminal event."""

    def __init__(
        self, reason: str, sent_at_ms: int | None = None, platform_message_id: str | None = None, attempt: int = 1
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent_at_ms = sent_at_ms
        self.platform_message_id = platform_message_id
        self.attempt = attempt


class AckedMeanwhile(Exception):
    """The message's ``ack`` came before another attempt was written: a copy sent before (an attempt whose answer was
    lost, a previous owner's send) reached the platform, so it is not sent again. ``attempts``: the attempts this
    worker wrote (at least 1, as terminal events count them); ``sent_at_ms``: when the first went out (None: none)."""

    def __init__(self, ack: Ack, attempts: int, sent_at_ms: int | None) -> None:
        super().__init__(f"acked after {attempts} attempts")
        self.ack = ack
        self.attempts = max(1, attempts)
        self.sent_at_ms = sent_at_ms


class Sends:
    """One message to its platform: the account's token bucket and circuit breaker, retries with backoff."""

    def __init__(self, settings: WorkerSettings, events: EventLog) -> None:
        self._settings = settings
        self._events = events
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._breakers: dict[tuple[str, str], CircuitBreaker] = {}
        self._breaker_policy = BreakerPolicy.of(settings)
        self._rng = random.Random()  # noqa: S311 - backoff jitter, not security

    async def send(
        self,
        entry: Entry,
        adapter: PlatformAdapter,
        prepared: PreparedSend,
        acked: asyncio.Future[Ack | None] | None = None,
    ) -> tuple[SendResult, int, int]:
        """Send with retries (equal-jitter backoff, Retry-After honoured); the result, attempts and send time.

        ``SendFailed`` when the platform refused the message or the retries ran out; ``AckedMeanwhile`` when
        ``acked`` (the message's ack future) holds an ack before an attempt is written."""
        settings = self._settings
        platform = entry.platform
        key = (platform, prepared.account)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(*settings.rate_limit(platform))
        breaker = self._breakers.get(key)
        if breaker is None:
            breaker = self._breakers[key] = CircuitBreaker(self._breaker_policy)
        send_latency = m.for_platform(platform).send_latency
        started = time.monotonic()
        attempt = 0
        first_sent_at_ms: int | None = None
        while True:
            attempt += 1
            wait = bucket.reserve()  # a token, and how long to wait before using it
            if wait > 0:
                await asyncio.sleep(wait)
            if breaker.state != "closed":
                m.CIRCUIT_OPEN.labels(platform, prepared.account).set(1)
                await breaker.admit()
                m.CIRCUIT_OPEN.labels(platform, prepared.account).set(0)
            if not entry.part.admitted():
                await entry.part.admit()
            ack = acked.result() if acked is not None and acked.done() and not acked.cancelled() else None
            if ack is not None:
                # Acked while this send waited or retried: the attempt whose answer timed out (or broke) had reached
                # the platform. Sent again now, the copy could reach the device after the room's next message.
                raise AckedMeanwhile(ack, attempt - 1, first_sent_at_ms)
            sent_at_ms = now_ms()
            if first_sent_at_ms is None:
                first_sent_at_ms = sent_at_ms
            t0 = time.perf_counter()
            try:
                result = await adapter.send(prepared, entry.part.owned)
            except RequestWithdrawn as withdrawn:  # the partition went while the send waited for a connection
                raise PartitionGone(entry.part.partition) from withdrawn
            except TransientPlatformError as transient:
                breaker.record(False)
                send_latency.observe(time.perf_counter() - t0)
                elapsed = time.monotonic() - started
                if (
                    attempt >= settings.worker_retry_max_attempts
                    or elapsed * 1000 >= settings.worker_retry_max_elapsed_ms
                ):
                    raise SendFailed(
                        f"gave up after {attempt} attempts in {elapsed:.1f}s: {transient.reason}", attempt=attempt
                    ) from transient
                delay = (
                    transient.retry_after
                    if transient.retry_after is not None
                    else equal_jitter_backoff(
                        attempt - 1,
                        settings.worker_retry_base_ms / 1000,
                        settings.worker_retry_cap_ms / 1000,
                        self._rng,
                    )
                )
                reason = (
                    "throttled" if transient.status == 429 else "server_error" if transient.status else "connection"
                )
                m.RETRIES.labels(platform, reason).inc()
                self._events.emit(
                    EventType.RETRIED,
                    entry.room_id,
                    entry.message_id,
                    platform,
                    entry.part.partition,
                    entry.offset,
                    attempt=attempt,
                    detail=f"{transient.reason}; next in {delay:.3f}s",
                )
                await asyncio.sleep(delay)
                continue
            except PermanentPlatformError as permanent:
                send_latency.observe(time.perf_counter() - t0)
                raise SendFailed(permanent.reason, attempt=attempt) from permanent
            breaker.record(True)
            send_latency.observe(time.perf_counter() - t0)
            # The adapter's stamp is when the request left, after any wait for a pooled connection: ack latency
            # (and the adaptive timeout learning from it) must not count that wait.
            return result, attempt, result.sent_at_ms or sent_at_ms
