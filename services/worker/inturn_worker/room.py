"""One sender loop per active room: send message N, wait for N's ack or timeout, only then N+1.

A room's loop is created with its first buffered message and ends when its queue is empty.
Rooms never wait for each other; the only things they share are bounded on purpose: a token
bucket and a circuit breaker per platform account, a connection pool per platform, and (in
'partition' mode only) one in-flight message per partition.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import structlog

from inturn.errors import PermanentPlatformError, TransientPlatformError
from inturn.metrics import worker as m
from inturn.platforms import PlatformAdapter, PreparedSend, SendResult
from inturn.schemas import Ack, AckStatus, DeadLetter, EventType, Message, OrderingMode, decode, now_ms
from inturn.settings.worker import WorkerSettings
from inturn_worker.acks import AckRouter
from inturn_worker.events import EventLog
from inturn_worker.limits import CircuitBreaker, TokenBucket, full_jitter_backoff
from inturn_worker.partition import PartitionGone, PartitionState
from inturn_worker.store import CursorUpdate, Store, retrying
from inturn_worker.timeouts import AckTimeout, Deadlines

log = structlog.get_logger("inturn.worker.room")


@dataclass(slots=True)
class Entry:
    """One consumed message waiting its turn in its room.

    It keeps the consumed bytes and the few fields the loop reads, not the decoded message: a decoded
    message costs twice its bytes, and tens of thousands wait at once. The message is decoded again
    (a few microseconds; it was validated at intake) only to render it, and a dead letter gets the
    original bytes.
    """

    part: PartitionState
    offset: int
    raw: bytes
    room_id: str
    message_id: str
    platform: str
    created_at_ms: int
    not_before_ms: int | None
    consumed_at_ms: int
    prepared: PreparedSend | PermanentPlatformError | None = None
    next: Entry | None = None  # the room's next entry (see EntryQueue)

    @classmethod
    def of(cls, part: PartitionState, offset: int, raw: bytes, message: Message, consumed_at_ms: int) -> Entry:
        """The entry of ``message``, decoded from ``raw``."""
        return cls(
            part,
            offset,
            raw,
            message.room_id,
            message.message_id,
            message.platform,
            message.created_at_ms,
            message.not_before_ms,
            consumed_at_ms,
        )

    def message(self) -> Message:
        """The message, decoded again from its bytes."""
        return decode(Message, self.raw)


class EntryQueue:
    """A room's entries in offset order, chained through ``Entry.next``.

    A ``deque`` reserves a 64-slot block even for one entry (about 600 bytes); most rooms hold one or
    two messages, and tens of thousands of rooms wait at once.
    """

    __slots__ = ("_head", "_size", "_tail")

    def __init__(self) -> None:
        self._head: Entry | None = None
        self._tail: Entry | None = None
        self._size = 0

    def append(self, entry: Entry) -> None:
        """Add ``entry`` at the end."""
        entry.next = None
        if self._tail is None:
            self._head = entry
        else:
            self._tail.next = entry
        self._tail = entry
        self._size += 1

    @property
    def head(self) -> Entry | None:
        """The first entry (None when empty)."""
        return self._head

    def popleft(self) -> Entry:
        """Remove and return the first entry."""
        entry = self._head
        if entry is None:
            raise IndexError("pop from an empty room queue")
        self._head = entry.next
        if self._head is None:
            self._tail = None
        entry.next = None
        self._size -= 1
        return entry

    def remove_if(self, drop: Callable[[Entry], bool]) -> None:
        """Keep only the entries ``drop`` is false for, in order."""
        entries = [e for e in self if not drop(e)]
        self._head = self._tail = None
        self._size = 0
        for entry in entries:
            self.append(entry)

    def __iter__(self) -> Iterator[Entry]:
        entry = self._head
        while entry is not None:
            following = entry.next
            yield entry
            entry = following

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._head is not None


@dataclass(slots=True)
class Room:
    """A room's queue (room order = offset order) and its running loop, if any."""

    room_id: str
    queue: EntryQueue = field(default_factory=EntryQueue)
    task: asyncio.Task[None] | None = None
    in_flight: bool = False
    blocked: bool = False
    head_since: float = 0.0


class _Failed(Exception):
    """A permanent failure of one message; what is known of its send goes into its terminal event."""

    def __init__(
        self, reason: str, sent_at_ms: int | None = None, platform_message_id: str | None = None, attempt: int = 1
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent_at_ms = sent_at_ms
        self.platform_message_id = platform_message_id
        self.attempt = attempt


class Rooms:
    """All rooms of this worker and the loop each runs."""

    def __init__(
        self,
        settings: WorkerSettings,
        adapters: dict[str, PlatformAdapter],
        events: EventLog,
        router: AckRouter,
        store: Store,
    ) -> None:
        self._settings = settings
        self._adapters = adapters
        self._events = events
        self._router = router
        self._store = store
        self._mode = OrderingMode(settings.worker_mode)
        self._awaits_ack = self._mode in (OrderingMode.ACK, OrderingMode.PARTITION)
        self._rooms: dict[str, Room] = {}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._breakers: dict[tuple[str, str], CircuitBreaker] = {}
        self._timeouts: dict[str, AckTimeout] = {}
        self._timeouts_shown: dict[str, float] = {}
        self._deadlines = Deadlines()
        self._cursor_updates: dict[str, CursorUpdate] = {}
        self._rng = random.Random()  # noqa: S311 - backoff jitter, not security
        self._prepare_ahead = settings.worker_prepare_ahead
        self._blocking = settings.worker_dead_letter_policy == "block"

    # --- intake side -------------------------------------------------------------------------------

    def enqueue(self, entry: Entry) -> None:
        """Append a consumed message to its room and make sure the room's loop runs.

        The entry is rendered at its turn (or ahead of it, after the previous send), not here: rendered at
        intake, a room's body was held while the room waited for a connection, and with 25k rooms in flight
        the worker's RSS then read 277-305 MiB in 9 of 10 runs, against 262-266 MiB in the 4 runs without it.
        """
        room_id = entry.room_id
        room = self._rooms.get(room_id)
        if room is None:
            room = self._rooms[room_id] = Room(room_id)
        room.queue.append(entry)
        if room.task is None:
            room.head_since = time.monotonic()
            room.task = asyncio.create_task(self._run(room), name=f"room:{room_id}")

    @property
    def active(self) -> int:
        """Rooms with buffered messages."""
        return len(self._rooms)

    def describe(self, room_id: str) -> dict[str, object] | None:
        """What this worker holds for a room (None when nothing): buffered messages, the head, in flight."""
        room = self._rooms.get(room_id)
        if room is None:
            return None
        head = room.queue.head
        return {
            "room_id": room_id,
            "buffered": len(room.queue),
            "head_message_id": head.message_id if head else None,
            "head_offset": head.offset if head else None,
            "partition": head.part.partition if head else None,
            "in_flight": room.in_flight,
            "blocked": room.blocked,
            "head_waiting_s": round(time.monotonic() - room.head_since, 3),
        }

    def take_cursor_updates(self) -> list[CursorUpdate]:
        """The cursor changes since the last call (the checkpoint writes them)."""
        updates = list(self._cursor_updates.values())
        self._cursor_updates.clear()
        return updates

    def restore_cursor_updates(self, updates: list[CursorUpdate]) -> None:
        """Put back updates a failed checkpoint could not write (newer ones win)."""
        for update in updates:
            current = self._cursor_updates.get(update.room_id)
            if current is None or (current.partition == update.partition and current.offset < update.offset):
                self._cursor_updates[update.room_id] = update

    def stuck(self) -> int:
        """Rooms whose head message has waited more than twice its platform's ack timeout (a gauge for alerts)."""
        now = time.monotonic()
        stuck = 0
        for room in self._rooms.values():
            head = room.queue.head
            if head is not None and now - room.head_since > 2 * self._timeout(head.platform).seconds:
                stuck += 1
        return stuck

    # --- revoke / drain ----------------------------------------------------------------------------

    async def drain(self, parts: list[PartitionState], grace_s: float) -> None:
        """Stop new sends for ``parts``; let in-flight messages finish within ``grace_s``; drop the rest."""
        for part in parts:
            part.revoked = True
            part.wake()
        gone = {id(p) for p in parts}
        rooms = [r for r in self._rooms.values() if r.queue.head is not None and id(r.queue.head.part) in gone]
        tasks = [r.task for r in rooms if r.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
            log.info(
                "partitions_drained",
                rooms=len(rooms),
                finished=len(tasks) - len(pending),
                cut_off=len(pending),
                grace_s=grace_s,
            )
        for room in rooms:
            room.queue.remove_if(lambda e: id(e.part) in gone)
            self._router.forget_room(room.room_id)
            if not room.queue and room.task is None:
                self._rooms.pop(room.room_id, None)
        m.ACTIVE_ROOMS.set(len(self._rooms))

    async def close(self) -> None:
        """Cancel every room loop (after a drain)."""
        tasks = [r.task for r in self._rooms.values() if r.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        self._rooms.clear()

    # --- the loop ----------------------------------------------------------------------------------

    async def _run(self, room: Room) -> None:
        try:
            while (entry := room.queue.head) is not None:
                if entry.part.gone:
                    return
                durable_first = await self._deliver(room, entry)
                room.queue.popleft()
                if durable_first and room.queue:
                    # It ended without an ack (timed out, dead-lettered): nothing on the acks topic proves it
                    # done, so its cursor must be in PostgreSQL before the next send, or a new owner of the
                    # partition would send it again as well as the one in flight.
                    await entry.part.wait_durable()
                room.head_since = time.monotonic()
        except PartitionGone:
            return
        finally:
            room.task = None
            room.in_flight = False
            if not room.queue:
                self._rooms.pop(room.room_id, None)

    async def _deliver(self, room: Room, entry: Entry) -> bool:
        """Take one message to its terminal outcome; True when that outcome left no ack behind."""
        part = entry.part
        cursor = part.cursors.get(room.room_id)
        if cursor is not None and entry.offset <= cursor:
            m.SKIPPED_DUPLICATES.inc()
            self._terminal(room, entry, EventType.SKIPPED_DUPLICATE, detail=f"room cursor at {cursor}")
            return False
        if room.blocked or (self._blocking and await self._store_blocked(room.room_id)):
            room.blocked = True
            m.BLOCKED_ROOMS.inc()
            await self._wait_unblocked(room, part)
            m.BLOCKED_ROOMS.dec()
        if entry.not_before_ms is not None:
            delay = (entry.not_before_ms - now_ms()) / 1000
            if delay > 0:
                await asyncio.sleep(delay)
        try:
            adapter = self._adapter(entry.platform)
            # The rendered send is passed on, never kept in a local here: this frame stays suspended while the
            # message awaits its ack, and would keep the body alive (see _send_and_wait).
            if self._mode is OrderingMode.PARTITION:
                async with part.lock:  # one message in flight per partition
                    return await self._send_and_wait(room, entry, adapter, self._prepared(adapter, entry))
            return await self._send_and_wait(room, entry, adapter, self._prepared(adapter, entry))
        except _Failed as failure:
            await self._dead_letter(room, entry, failure)
            return True

    def _adapter(self, platform: str) -> PlatformAdapter:
        adapter = self._adapters.get(platform)
        if adapter is None:
            raise _Failed(f"no adapter for platform {platform!r}")
        return adapter

    @staticmethod
    def _prepared(adapter: PlatformAdapter, entry: Entry) -> PreparedSend:
        prepared = entry.prepared
        if prepared is None:
            try:
                prepared = adapter.prepare(entry.message())
            except PermanentPlatformError as exc:
                prepared = exc
            entry.prepared = prepared
        if isinstance(prepared, PermanentPlatformError):
            raise _Failed(prepared.reason)
        return prepared

    async def _send_and_wait(self, room: Room, entry: Entry, adapter: PlatformAdapter, prepared: PreparedSend) -> bool:
        """Send, then (in the ack-gated modes) wait for the ack or the timeout; True when it timed out."""
        platform = entry.platform
        future: asyncio.Future[Ack | None] | None = None
        if self._awaits_ack:
            # Only once the partition's acks were read up to its assignment (admit waits for that) is a missing
            # ack evidence that the message still needs sending.
            if not entry.part.admitted():  # the common case needs no await
                await entry.part.admit()
            future = self._router.expect(room.room_id, entry.message_id)
            if future.done():
                # Acked before we sent it: a previous owner sent it and the ack raced the takeover.
                ack = future.result()
                if ack is not None:
                    self._resolved(room, entry, ack, sent_at_ms=None, platform_message_id=ack.platform_message_id)
                    return False
        room.in_flight = True
        result, attempt, sent_at_ms = await self._send(entry, adapter, prepared)
        # Sent: the rendered body is not needed again, and the room may wait long for its ack. Every reference
        # goes, the parameter too: with tens of thousands of rooms awaiting acks, a kilobyte each adds up.
        entry.prepared = None
        del prepared
        metrics = m.for_platform(platform)
        metrics.dispatched.inc()  # no event: the message's terminal event carries when and how it was sent
        if future is None:
            if self._mode is OrderingMode.FIXED_DELAY:
                self._prepare_next(room, adapter)
                await asyncio.sleep(self._settings.worker_fixed_delay_ms / 1000)
            self._terminal(
                room,
                entry,
                EventType.SENT,
                sent_at_ms=sent_at_ms,
                platform_message_id=result.platform_message_id,
                attempt=attempt,
            )
            return False
        self._router.sent(room.room_id, entry.message_id, result.platform_message_id)
        self._prepare_next(room, adapter)
        timeout = self._timeout(platform)
        deadline = self._deadlines.add(timeout.seconds, future)
        try:
            ack = await future
        finally:
            self._deadlines.cancel(deadline)
        if ack is None:
            metrics.ack_timeouts.inc()
            self._terminal(
                room,
                entry,
                EventType.ACK_TIMEOUT,
                sent_at_ms=sent_at_ms,
                platform_message_id=result.platform_message_id,
                attempt=attempt,
                detail=f"no ack within {timeout.seconds:.3f}s",
                timed_out=True,
            )
            return True
        latency = max(0.0, (now_ms() - sent_at_ms) / 1000)
        timeout.observe(latency)
        metrics.ack_latency.observe(latency)
        self._resolved(room, entry, ack, sent_at_ms, result.platform_message_id, attempt)
        return False

    def _resolved(
        self, room: Room, entry: Entry, ack: Ack, sent_at_ms: int | None, platform_message_id: str, attempt: int = 1
    ) -> None:
        if ack.status is AckStatus.FAILED:
            # The platform took the message but could not deliver it: a permanent failure of this message.
            raise _Failed(
                f"platform reported failed: {ack.error or 'no reason given'}", sent_at_ms, platform_message_id, attempt
            )
        m.for_platform(entry.platform).acked.inc()
        self._terminal(
            room,
            entry,
            EventType.ACKED,
            sent_at_ms=sent_at_ms,
            acked_at_ms=ack.received_at_ms,
            platform_message_id=platform_message_id,
            attempt=attempt,
            detail=ack.status.value,
        )

    async def _send(
        self, entry: Entry, adapter: PlatformAdapter, prepared: PreparedSend
    ) -> tuple[SendResult, int, int]:
        """Send with retries (full-jitter backoff, Retry-After honoured); the result, attempts and send time."""
        settings = self._settings
        platform = entry.platform
        key = (platform, prepared.account)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(settings.worker_rate_limit_per_s, settings.worker_rate_burst)
        breaker = self._breakers.get(key)
        if breaker is None:
            breaker = self._breakers[key] = CircuitBreaker(
                settings.worker_breaker_failure_ratio,
                settings.worker_breaker_min_calls,
                settings.worker_breaker_window_s,
                settings.worker_breaker_open_s,
                settings.worker_breaker_probes,
            )
        send_latency = m.for_platform(platform).send_latency
        started = time.monotonic()
        attempt = 0
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
            sent_at_ms = now_ms()
            t0 = time.perf_counter()
            try:
                result = await adapter.send(prepared)
            except TransientPlatformError as exc:
                breaker.record(False)
                send_latency.observe(time.perf_counter() - t0)
                elapsed = time.monotonic() - started
                if (
                    attempt >= settings.worker_retry_max_attempts
                    or elapsed * 1000 >= settings.worker_retry_max_elapsed_ms
                ):
                    raise _Failed(
                        f"gave up after {attempt} attempts in {elapsed:.1f}s: {exc.reason}", attempt=attempt
                    ) from exc
                delay = (
                    exc.retry_after
                    if exc.retry_after is not None
                    else full_jitter_backoff(
                        attempt - 1,
                        settings.worker_retry_base_ms / 1000,
                        settings.worker_retry_cap_ms / 1000,
                        self._rng,
                    )
                )
                reason = "throttled" if exc.status == 429 else "server_error" if exc.status else "connection"
                m.RETRIES.labels(platform, reason).inc()
                self._events.emit(
                    EventType.RETRIED,
                    entry.room_id,
                    entry.message_id,
                    platform,
                    entry.part.partition,
                    entry.offset,
                    attempt=attempt,
                    detail=f"{exc.reason}; next in {delay:.3f}s",
                )
                await asyncio.sleep(delay)
                continue
            except PermanentPlatformError as exc:
                send_latency.observe(time.perf_counter() - t0)
                raise _Failed(exc.reason, attempt=attempt) from exc
            breaker.record(True)
            send_latency.observe(time.perf_counter() - t0)
            # The adapter's stamp is when the request left, after any wait for a pooled connection: ack latency
            # (and the adaptive timeout learning from it) must not count that wait.
            return result, attempt, result.sent_at_ms or sent_at_ms

    def _timeout(self, platform: str) -> AckTimeout:
        timeout = self._timeouts.get(platform)
        if timeout is None:
            s = self._settings
            timeout = self._timeouts[platform] = AckTimeout(
                s.ack_timeout_ms(platform) / 1000,
                adaptive=s.worker_adaptive_timeout,
                quantile=s.worker_adaptive_quantile,
                factor=s.worker_adaptive_factor,
                min_s=s.worker_adaptive_min_ms / 1000,
                max_s=s.worker_adaptive_max_ms / 1000,
            )
        seconds = timeout.seconds
        if seconds != self._timeouts_shown.get(platform):  # the gauge is set when the timeout changes, not per send
            self._timeouts_shown[platform] = seconds
            m.for_platform(platform).ack_timeout_seconds.set(seconds)
        return timeout

    def _prepare_next(self, room: Room, adapter: PlatformAdapter) -> None:
        """Render the next few messages of the room while this one waits (sends stay in order)."""
        for i, entry in enumerate(room.queue):
            if i > self._prepare_ahead:
                break
            if i == 0 or entry.prepared is not None or entry.platform != adapter.name:
                continue
            try:
                entry.prepared = adapter.prepare(entry.message())
            except PermanentPlatformError as exc:
                entry.prepared = exc

    async def _dead_letter(self, room: Room, entry: Entry, failure: _Failed) -> None:
        reason = failure.reason
        letter = DeadLetter.of(
            "worker",
            reason,
            entry.raw,
            room_id=room.room_id,
            message_id=entry.message_id,
            topic=self._settings.topic_messages,
            partition=entry.part.partition,
            offset=entry.offset,
        )
        self._events.dead_letter(letter, room.room_id)
        await retrying(lambda: self._store.dead_letter(letter), "dead_letter", lambda: entry.part.fenced)
        m.DEAD_LETTERS.labels(entry.platform, _reason_kind(reason)).inc()
        log.warning(
            "dead_lettered",
            reason=reason,
            room_id=room.room_id,
            message_id=entry.message_id,
            partition=entry.part.partition,
            offset=entry.offset,
        )
        self._terminal(
            room,
            entry,
            EventType.DEAD_LETTERED,
            sent_at_ms=failure.sent_at_ms,
            platform_message_id=failure.platform_message_id,
            attempt=failure.attempt,
            detail=reason,
        )
        if self._blocking:
            room.blocked = True
            await retrying(lambda: self._store.block(room.room_id, reason), "block_room", lambda: entry.part.fenced)

    def _terminal(
        self,
        room: Room,
        entry: Entry,
        type_: EventType,
        *,
        sent_at_ms: int | None = None,
        acked_at_ms: int | None = None,
        platform_message_id: str | None = None,
        attempt: int = 1,
        detail: str | None = None,
        timed_out: bool = False,
    ) -> None:
        """Record a message's one terminal outcome: event, offset, cursor, ack router."""
        part = entry.part
        room.in_flight = False
        self._events.emit(
            type_,
            room.room_id,
            entry.message_id,
            entry.platform,
            part.partition,
            entry.offset,
            attempt=attempt,
            created_at_ms=entry.created_at_ms,
            consumed_at_ms=entry.consumed_at_ms,
            sent_at_ms=sent_at_ms,
            acked_at_ms=acked_at_ms,
            platform_message_id=platform_message_id,
            detail=detail,
        )
        if self._awaits_ack:
            self._router.finish(
                room.room_id,
                entry.message_id,
                platform_message_id,
                timed_out=timed_out,
                partition=part.partition,
                offset=entry.offset,
                platform=entry.platform,
            )
        if part.fenced:
            return  # another worker owns the partition now: nothing of ours may mark it done
        part.offsets.terminal(entry.offset)
        if type_ is EventType.SKIPPED_DUPLICATE:
            return  # the cursor is already past it; moving it back would re-send what follows
        part.cursors[room.room_id] = entry.offset
        self._cursor_updates[room.room_id] = CursorUpdate(
            room.room_id, part.partition, entry.offset, entry.message_id, type_.value
        )

    async def _store_blocked(self, room_id: str) -> bool:
        """Policy 'block' only: whether an operator still has to release the room."""
        return await retrying(lambda: self._store.is_blocked(room_id), "is_blocked")

    async def _wait_unblocked(self, room: Room, part: PartitionState) -> None:
        """Policy 'block': the room waits until an operator deletes its blocked_rooms row."""
        log.warning("room_blocked", room_id=room.room_id, partition=part.partition)
        while await retrying(lambda: self._store.is_blocked(room.room_id), "is_blocked", lambda: part.gone):
            if part.gone:
                raise PartitionGone(part.partition)
            await asyncio.sleep(2.0)  # an operator's action is rare; polling every 2 s is plenty
        room.blocked = False


def _reason_kind(reason: str) -> str:
    """A low-cardinality label for a dead-letter reason."""
    if reason.startswith("gave up"):
        return "retries_exhausted"
    if reason.startswith("platform reported failed"):
        return "platform_failed"
    if reason.startswith("HTTP 4"):
        return "rejected"
    if reason.startswith("no adapter"):
        return "unknown_platform"
    return "other"
