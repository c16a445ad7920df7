"""Ack futures: a room's loop waits on one; the acks reader resolves it.

An ack is matched by (room_id, message_id) when the platform echoed our callback data, else by
the platform message id the send returned, else (a watermark ack, Messenger's delivery watermark) by its
room: a delivery naming the in-flight message by its mid resolves it; any other resolves it when the watermark is later
than that message's send on the platform's clock (``inturn.platforms.messenger.PlatformClock``, learned from the
deliveries that name a mid, so a worker clock apart from the platform's neither resolves a message with an older
watermark nor waits out a genuine one); an older watermark resolves nothing. Early acks (before the send
returned, or from a previous owner of the room) are kept for a bounded time and matched when their message comes up;
late acks (after the message timed out) are reported once and never resolve anything else;
duplicates (a second status of a resolved message) are counted and dropped.

Once this worker's send of a message returned, only the ack of that copy (its platform message id) resolves the
message: a message may have gone out more than once (a retried attempt whose first answer was lost, a previous
owner's send before a takeover), and the ack of another copy says nothing of where this one is. Were the room's next
message released by it, it could reach the device before this copy: an older message after a newer one
(docs/reliability.md, problems 11 and 12).

Ack timeouts per platform: fixed from settings, or learned from observed ack latency. The adaptive timeout is a
high quantile of recent ack latencies times a factor, clamped. It lets rooms stall less when acks go missing
while staying well above normal latency. Timed-out messages do not feed it (their latency is unknown), so it
cannot collapse onto itself. Every waiting message's deadline sits on one loop timer (``inturn.deadlines``).
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from enum import Enum

import msgspec

from inturn.metrics import worker as m
from inturn.platforms import SendResult
from inturn.platforms.messenger import PlatformClock
from inturn.schemas import Ack
from inturn.settings.worker import WorkerSettings


class Routed(Enum):
    """What the router did with an ack."""

    RESOLVED = "resolved"
    EARLY = "early"
    LATE = "late"
    DUPLICATE = "duplicate"


class Finished(msgspec.Struct, gc=False):
    """A message that reached an outcome, remembered for classifying the acks that still come for it.

    ``gc=False``: the router remembers up to ``finished_capacity`` (200,000) of them, each holding text, numbers and
    flags only. As tracked objects they passed through every older generation of the cyclic collector, which
    then walked hundreds of thousands of them per collection (a pause of the whole loop)."""

    message_id: str
    timed_out: bool
    partition: int
    offset: int
    platform: str
    late_reported: bool = False


def of_copy(ack: Ack | None, platform_message_id: str | None) -> bool:
    """Whether ``ack`` may be the ack of the copy the platform accepted under ``platform_message_id``: the same
    platform id, or one of them unknown (a deadline's None; a watermark ack, which ``watermark_covers`` judges by the
    send's time)."""
    if ack is None or ack.watermark_ms is not None or not platform_message_id:
        return True
    return ack.platform_message_id == platform_message_id


class AckRouter:
    """Matches acks to waiting messages; bounded memory for early and finished messages."""

    def __init__(self, early_ttl_s: float, finished_capacity: int = 200_000) -> None:
        self._early_ttl = early_ttl_s
        self._finished_capacity = finished_capacity
        self._waiting: dict[tuple[str, str], asyncio.Future[Ack | None]] = {}
        self._waiting_pmid: dict[str, tuple[str, str]] = {}
        #: message -> the platform message id of this worker's accepted send of it (once its send returned)
        self._copies: dict[tuple[str, str], str] = {}
        self._early: dict[tuple[str, str], Ack] = {}
        self._early_pmid: dict[str, Ack] = {}
        self._early_expiry: deque[tuple[float, tuple[str, str] | None, str]] = deque()
        self._finished: OrderedDict[tuple[str, str], Finished] = OrderedDict()
        self._finished_pmid: dict[str, tuple[str, str]] = {}
        #: room -> its in-flight message that a watermark resolves, and that message's send
        self._by_watermark: dict[str, tuple[tuple[str, str], SendResult]] = {}
        #: room -> the newest watermark ack that resolved nothing yet (it may come before its send returned)
        self._early_watermark: OrderedDict[str, tuple[float, Ack]] = OrderedDict()
        #: platform -> how far its watermarks run ahead of this worker's clock
        self._clocks: dict[str, PlatformClock] = {}
        #: platform -> room -> the newest watermark ack that came after the room's in-flight send returned but did not
        #: cover it by the lead learned so far; judged again when the lead falls (``_lead_fell``)
        self._uncovered: dict[str, dict[str, Ack]] = {}

    @property
    def waiting(self) -> int:
        """Messages waiting for their ack."""
        return len(self._waiting)

    def expect(self, room_id: str, message_id: str) -> asyncio.Future[Ack | None]:
        """A future for this message's ack; already resolved when an early ack by message id is waiting."""
        key = (room_id, message_id)
        future: asyncio.Future[Ack | None] = asyncio.get_running_loop().create_future()
        early = self._early.pop(key, None)
        if early is not None:
            future.set_result(early)
        self._waiting[key] = future
        return future

    def sent(
        self, room_id: str, message_id: str, result: SendResult, *, by_watermark: bool = False
    ) -> asyncio.Future[Ack | None] | None:
        """The send returned ``result``: match acks by its platform id too, including one that came early; with
        ``by_watermark``, also a watermark ack of the room that covers the send. Returns the future to wait on: a new
        one when the message's was resolved by the ack of another copy of it (``of_copy``), which this copy's own
        ack (or its timeout) must then settle; None when the message is not waited for."""
        key = (room_id, message_id)
        future = self._waiting.get(key)
        if future is None:
            return None
        pmid = result.platform_message_id
        self._copies[key] = pmid
        self._waiting_pmid[pmid] = key
        if future.done() and not future.cancelled() and not of_copy(future.result(), pmid):
            # Another copy reached the platform (an earlier attempt whose answer was lost, a previous owner's send)
            # and was acked while this one was being sent: this one may still be on its way to the device.
            future = asyncio.get_running_loop().create_future()
            self._waiting[key] = future
        early = self._early_pmid.pop(pmid, None)
        if early is not None and not future.done():
            future.set_result(early)
        if by_watermark:
            self._by_watermark[room_id] = (key, result)
            kept = self._early_watermark.pop(room_id, None)
            if kept is not None and time.monotonic() < kept[0] and not future.done():
                self._route_watermark(kept[1])
        return future

    def finish(
        self,
        room_id: str,
        message_id: str,
        platform_message_id: str | None,
        *,
        timed_out: bool,
        partition: int,
        offset: int,
        platform: str,
    ) -> None:
        """The message reached its outcome: stop waiting, remember it for late and duplicate acks."""
        key = (room_id, message_id)
        self._waiting.pop(key, None)
        self._copies.pop(key, None)
        if room_id in self._by_watermark and self._by_watermark[room_id][0] == key:
            del self._by_watermark[room_id]
            self._uncovered.get(platform, {}).pop(room_id, None)
        if platform_message_id is not None:
            self._waiting_pmid.pop(platform_message_id, None)
            self._finished_pmid[platform_message_id] = key
        self._finished[key] = Finished(message_id, timed_out, partition, offset, platform)
        if len(self._finished) > self._finished_capacity:
            self._finished.popitem(last=False)
            if len(self._finished_pmid) > 2 * self._finished_capacity:
                self._finished_pmid.clear()

    def settled(self, room_id: str, message_id: str | None, platform_message_id: str | None) -> str | None:
        """The platform of the message an ack is about, when nothing the ack says can change that message's outcome
        any more: its ack future was resolved by an earlier ack of the same copy (``route`` would count this one a
        duplicate), or it finished and a late ack for it was already reported. None when the ack must be decoded and
        routed."""
        key = (room_id, message_id) if message_id else self._finished_pmid.get(platform_message_id or "")
        if key is None:
            return None
        future = self._waiting.get(key)
        if future is not None:
            if not future.done() or future.cancelled():
                return None
            resolved_by = future.result()  # None: its deadline passed; its outcome is not recorded yet
            if resolved_by is None or not of_copy(resolved_by, platform_message_id):
                return None  # resolved by another copy's ack: this one may be the ack of the copy still awaited
            return resolved_by.platform
        finished = self._finished.get(key)
        if finished is None or (finished.timed_out and not finished.late_reported):
            return None
        return finished.platform

    def forget_partitions(self, partitions: set[int]) -> None:
        """These partitions are (re)assigned: forget the messages of theirs this worker finished before.

        A worker that lost a partition and gets it back re-reads its acks; an ack of a message it had seen
        acked, but whose cursor never reached PostgreSQL, is the only proof that the message is done, so it
        must wait as an early ack for that message to come up again, not be dropped as a duplicate.
        """
        for key in [k for k, f in self._finished.items() if f.partition in partitions]:
            del self._finished[key]

    def forget_room(self, room_id: str) -> None:
        """Drop waiting futures of a room whose partition was taken away (they are cancelled by the caller)."""
        for key in [k for k in self._waiting if k[0] == room_id]:
            del self._waiting[key]
            self._copies.pop(key, None)
        for rooms in self._uncovered.values():
            rooms.pop(room_id, None)

    def route(self, ack: Ack) -> tuple[Routed, Finished | None]:
        """Resolve the waiting message this ack belongs to, or classify it (early, late, duplicate)."""
        if ack.watermark_ms is not None and not ack.message_id:
            return self._route_watermark(ack), None
        key: tuple[str, str] | None = (ack.room_id, ack.message_id) if ack.message_id else None
        if key is None:
            key = self._waiting_pmid.get(ack.platform_message_id) or self._finished_pmid.get(ack.platform_message_id)
        if key is not None:
            future = self._waiting.get(key)
            if future is not None:
                copy = self._copies.get(key)  # None until this worker's send of it returned
                if future.done():
                    resolved_by = None if future.cancelled() else future.result()
                    if copy is None and resolved_by is not None and not of_copy(resolved_by, ack.platform_message_id):
                        # Resolved by another copy's ack while this worker's send is still out: this may be the ack
                        # of that send, which ``sent`` then matches by its platform id.
                        self._keep_early(ack, None)
                        return Routed.EARLY, None
                    return Routed.DUPLICATE, None
                if copy is not None and not of_copy(ack, copy):
                    return Routed.DUPLICATE, None  # another copy's ack: this worker's copy may still be on its way
                future.set_result(ack)
                return Routed.RESOLVED, None
            finished = self._finished.get(key)
            if finished is not None:
                if finished.timed_out and not finished.late_reported:
                    finished.late_reported = True
                    return Routed.LATE, finished
                return Routed.DUPLICATE, finished
        self._keep_early(ack, key)
        return Routed.EARLY, None

    def _route_watermark(self, ack: Ack) -> Routed:
        """A watermark ack: it resolves the room's in-flight message when it covers that send; one that came before
        the send returned is kept (the newest per room) for ``sent``; one older than the send resolves nothing."""
        assert ack.watermark_ms is not None
        waiting = self._by_watermark.get(ack.room_id)
        if waiting is not None:
            key, result = waiting
            future = self._waiting.get(key)
            clock = self._clocks.get(ack.platform)
            if clock is None:
                clock = self._clocks[ack.platform] = PlatformClock()
            if ack.platform_message_id == result.platform_message_id:  # the delivery names it (Messenger's mids)
                if result.sent_at_ms is not None:
                    before = clock.lead_ms
                    clock.observe(result.sent_at_ms, ack.watermark_ms)
                    if before is not None and (clock.lead_ms or 0) < before:
                        self._lead_fell(ack.platform, clock)
                if future is not None and not future.done():
                    future.set_result(ack)  # a watermark kept for it goes when it finishes (``finish``)
                    return Routed.RESOLVED
                return Routed.DUPLICATE
            if future is not None and not future.done():
                if clock.covers(result.sent_at_ms, ack.watermark_ms):
                    future.set_result(ack)
                    return Routed.RESOLVED
                # Not later than the send by the lead learned so far, which only ever overstates the true lead: the
                # lead may fall with the next deliveries that name their mids, and then this watermark covers it.
                rooms = self._uncovered.setdefault(ack.platform, {})
                kept_ack = rooms.get(ack.room_id)
                if kept_ack is None or (kept_ack.watermark_ms or 0) < ack.watermark_ms:
                    rooms[ack.room_id] = ack
            return Routed.DUPLICATE  # older than the in-flight send: it confirms earlier messages only
        kept = self._early_watermark.get(ack.room_id)
        if kept is None or (kept[1].watermark_ms or 0) < ack.watermark_ms:
            self._early_watermark[ack.room_id] = (time.monotonic() + self._early_ttl, ack)
            self._early_watermark.move_to_end(ack.room_id)
            while len(self._early_watermark) > self._finished_capacity:
                self._early_watermark.popitem(last=False)
        return Routed.EARLY

    def _lead_fell(self, platform: str, clock: PlatformClock) -> None:
        """``platform``'s learned lead fell: resolve the in-flight messages its kept watermarks now cover (one kept
        per room with a message in flight, so this is bounded by the rooms waiting on the platform)."""
        rooms = self._uncovered.get(platform)
        if not rooms:
            return
        for room_id, ack in list(rooms.items()):
            waiting = self._by_watermark.get(room_id)
            future = self._waiting.get(waiting[0]) if waiting is not None else None
            if waiting is None or future is None or future.done():
                del rooms[room_id]
            elif ack.watermark_ms is not None and clock.covers(waiting[1].sent_at_ms, ack.watermark_ms):
                del rooms[room_id]
                future.set_result(ack)

    def _keep_early(self, ack: Ack, key: tuple[str, str] | None) -> None:
        now = time.monotonic()
        self._expire(now)
        if key is not None:
            self._early.setdefault(key, ack)
        else:
            self._early_pmid.setdefault(ack.platform_message_id, ack)
        self._early_expiry.append((now + self._early_ttl, key, ack.platform_message_id))

    def _expire(self, now: float) -> None:
        expiry = self._early_expiry
        while expiry and expiry[0][0] <= now:
            _, key, pmid = expiry.popleft()
            if key is not None:
                self._early.pop(key, None)
            else:
                self._early_pmid.pop(pmid, None)


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
