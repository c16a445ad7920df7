"""One sender loop per active room: send message N, wait for N's ack or timeout, only then N+1.

A room's loop is created with its first buffered message, takes the room's messages one after the other, and
retires when the room has nothing more to send (or ``INTURN_WORKER_ROOM_IDLE_MS`` after that).
Rooms never wait for each other; the only things they share are bounded on purpose: a token
bucket and a circuit breaker per platform account, a connection pool per platform, and (in
'partition' mode only) one in-flight message per partition.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass

import structlog

from inturn.deadlines import Deadline, Deadlines, expire_future
from inturn.errors import PermanentPlatformError
from inturn.logs import bind_work
from inturn.metrics import worker as m
from inturn.platforms import AckKind, PlatformAdapter, PreparedSend, SendResult
from inturn.schemas import ANSWERED, Ack, AckStatus, EventType, OrderingMode, now_ms
from inturn.settings.worker import WorkerSettings
from inturn_worker.acks import AckRouter, AckTimeout, AckTimeouts
from inturn_worker.dead_letters import DeadLetters
from inturn_worker.events import EventLog
from inturn_worker.limits import AckedMeanwhile, SendFailed, Sends
from inturn_worker.partition import Entry, Partition, PartitionGone, Room

log = structlog.get_logger("inturn.worker.room")

_NO_LOCK = nullcontext()  # what a send holds outside 'partition' mode


@dataclass(slots=True)
class Waiting:
    """A message sent, waiting for its ack: the future the ack resolves, the deadline that ends the wait, and what
    its outcome records."""

    future: asyncio.Future[Ack | None]
    deadline: Deadline
    timeout: AckTimeout
    platform_message_id: str
    sent_at_ms: int
    attempt: int


class Rooms:
    """All rooms of this worker and the loop each runs (one message at a time, through ``Delivery``)."""

    def __init__(self, settings: WorkerSettings, parts: Mapping[int, Partition], delivery: Delivery) -> None:
        self._parts = parts  # the partitions this worker owns, each holding its rooms
        self._delivery = delivery
        self._idle_s = settings.worker_room_idle_ms / 1000
        self._deadlines = Deadlines()

    # --- intake side -------------------------------------------------------------------------------

    def enqueue(self, entry: Entry) -> None:
        """Append a consumed message to its room and make sure the room's loop runs.

        The entry is rendered at its turn (or just ahead of it), not here: rendered at intake, its body is held
        while the room waits for a connection (25k rooms in flight: 277-305 MiB RSS against 262-266 MiB)."""
        room = entry.part.room_for(entry.room_id)
        entry.room_id = room.room_id  # one string per room, not one per buffered message
        if not room.queue:
            room.head_since = time.monotonic()
        room.queue.append(entry)
        if room.task is None:
            # The task is named by the room's id itself: the room already holds that string.
            room.task = asyncio.create_task(self._run(room), name=room.room_id)
        elif room.wakeup is not None and not room.wakeup.done():
            room.wakeup.set_result(None)  # the room's loop was idle: it takes this one

    @property
    def active(self) -> int:
        """Rooms with buffered messages (idle loops not counted)."""
        return sum(1 for part in self._parts.values() for room in part.rooms.values() if room.queue)

    def stuck(self) -> int:
        """Rooms whose head message has waited more than twice its platform's ack timeout (a gauge for alerts)."""
        now = time.monotonic()
        stuck = 0
        for room in (r for part in self._parts.values() for r in part.rooms.values()):
            head = room.queue.head
            if head is not None and now - room.head_since > 2 * self._delivery.ack_timeout_s(head.platform):
                stuck += 1
        return stuck

    # --- revoke / drain ----------------------------------------------------------------------------

    async def drain(self, parts: list[Partition], grace_s: float) -> None:
        """Let in-flight messages of ``parts`` (revoked or fenced: no new send starts) finish within ``grace_s``;
        drop the rest."""
        rooms = [room for part in parts for room in part.rooms.values()]
        for room in rooms:
            if room.wakeup is not None and not room.wakeup.done():
                room.wakeup.set_result(None)  # an idle loop: it sees the partition gone and ends
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
        for part in parts:
            for room_id in part.drop_rooms():
                self._delivery.forget_room(room_id)
        m.ACTIVE_ROOMS.set(self.active)

    async def close(self) -> None:
        """Cancel every room loop (after a drain)."""
        tasks = [r.task for part in self._parts.values() for r in part.rooms.values() if r.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for part in self._parts.values():
            part.drop_rooms()

    # --- the loop ----------------------------------------------------------------------------------

    async def _run(self, room: Room) -> None:
        """The room's loop: its messages one after the other. With ``worker_room_idle_ms`` 0 (the default) it retires
        as soon as the room has nothing to send (the next message starts another); otherwise it waits that long
        for the room's next message first."""
        part = room.part
        idle_s = self._idle_s
        try:
            while True:
                entry = room.queue.head
                if entry is None:
                    if part.gone or not idle_s or not await self._idle(room, idle_s):
                        return
                    continue
                if part.gone:
                    return
                if part.awaits_durable(room.room_id):
                    # The previous one ended without an ack (timed out, dead-lettered): its cursor must be durable
                    # before this send, or a new owner of the partition would send it again as well as this one.
                    await part.wait_durable()
                await self._delivery.deliver(room, entry)
                room.queue.popleft()
                room.head_since = time.monotonic()
        except PartitionGone:
            return
        finally:
            room.task = None
            room.in_flight = False
            part.retire(room)

    async def _idle(self, room: Room, idle_s: float) -> bool:
        """Wait up to ``idle_s`` for the room's next message; whether one came."""
        wakeup: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        room.wakeup = wakeup
        deadline = self._deadlines.add(idle_s, expire_future, wakeup)
        try:
            await wakeup
        finally:
            self._deadlines.cancel(deadline)
            room.wakeup = None
        return room.queue.head is not None


class Delivery:
    """One message to its terminal outcome: skipped as a duplicate, held by a blocked room, sent, its ack (or
    timeout) awaited, dead-lettered; the outcome recorded (event, partition, ack router)."""

    def __init__(
        self,
        settings: WorkerSettings,
        adapters: dict[str, PlatformAdapter],
        events: EventLog,
        router: AckRouter,
        letters: DeadLetters,
    ) -> None:
        self._settings = settings
        self._adapters = adapters
        self._events = events
        self._router = router
        self._letters = letters
        self._mode = OrderingMode(settings.worker_mode)
        self._awaits_ack = self._mode in (OrderingMode.ACK, OrderingMode.PARTITION)
        self._sends = Sends(settings, events)
        self._timeouts = AckTimeouts(settings)
        self._deadlines = Deadlines()
        self._prepare_ahead = settings.worker_prepare_ahead

    def ack_timeout_s(self, platform: str) -> float:
        """The ack timeout in force for ``platform``."""
        return self._timeouts.of(platform).seconds

    def forget_room(self, room_id: str) -> None:
        """The room is this worker's no more: drop what the ack router keeps for it."""
        self._router.forget_room(room_id)

    async def deliver(self, room: Room, entry: Entry) -> None:
        """Take one message to its terminal outcome. Whatever is logged meanwhile in the room's task (sends,
        retries, dead letters, a blocked room) carries the message: room, message id, partition and offset (bound
        in the task's own context, replaced by the room's next message)."""
        part = entry.part
        bind_work(room_id=room.room_id, message_id=entry.message_id, partition=part.partition, offset=entry.offset)
        if self._awaits_ack and not part.admitted():  # the cursor includes the ends read back (``Partition.cursor``)
            await part.admit()
        cursor = part.cursor(room.room_id)
        done = f"room cursor at {cursor}" if cursor is not None and entry.offset <= cursor else None
        if done is None and part.sent_before(room.room_id, entry.message_id):
            done = "message id among the room's recent sends"  # a second copy at a later offset: not sent again
        if done is not None:
            m.SKIPPED_DUPLICATES.inc()
            self._terminal(room, entry, EventType.SKIPPED_DUPLICATE, detail=done)
            return
        if room.blocked or (self._letters.blocking and await self._letters.is_blocked(room.room_id)):
            room.blocked = True
            m.BLOCKED_ROOMS.inc()
            await self._letters.wait_released(room, part)
            m.BLOCKED_ROOMS.dec()
        if entry.not_before_ms is not None:
            delay = (entry.not_before_ms - now_ms()) / 1000
            if delay > 0:
                await asyncio.sleep(delay)
        try:
            adapter = self._adapter(entry.platform)
            # 'partition' mode: one message in flight per partition.
            async with part.lock if self._mode is OrderingMode.PARTITION else _NO_LOCK:
                waiting = await self._send(room, entry, adapter)
                if waiting is not None:
                    # The ack is awaited in this frame, not in one of its own: tens of thousands of rooms wait at
                    # once, and each suspended frame holds its locals (about 400 bytes for the send's).
                    try:
                        ack = await waiting.future
                    finally:
                        self._deadlines.cancel(waiting.deadline)
                    self._settle(room, entry, waiting, ack)
        except SendFailed as failure:
            await self._dead_letter(room, entry, failure)

    def _adapter(self, platform: str) -> PlatformAdapter:
        adapter = self._adapters.get(platform)
        if adapter is None:
            raise SendFailed(f"no adapter for platform {platform!r}")
        return adapter

    async def _send(self, room: Room, entry: Entry, adapter: PlatformAdapter) -> Waiting | None:
        """Send; in the ack-gated modes, what the room now waits for (its ack or the timeout). None when the message
        reached its outcome here (acked before or while it was sent, or no ack to wait for).

        The rendered send goes straight into the send, never into a local that outlives it: with tens of thousands
        of rooms awaiting acks, a kilobyte of body each adds up."""
        platform = entry.platform
        future: asyncio.Future[Ack | None] | None = None
        # Only once the partition's acks were read up to its assignment is a missing ack evidence that the message still
        # needs sending: ``deliver`` admitted it before (that stays true; the lease, a revoke and a fence are asked
        # again right before the write, in ``Sends.send``).
        if self._awaits_ack and adapter.ack_kind is not AckKind.SYNCHRONOUS:  # synchronous: the answer is the ack
            future = self._router.expect(room.room_id, entry.message_id)
            if future.done():
                # Acked before we sent it: a previous owner sent it and the ack raced the takeover.
                ack = future.result()
                if ack is not None:
                    self._resolved(room, entry, ack, sent_at_ms=None, platform_message_id=ack.platform_message_id)
                    return None
        room.in_flight = True
        try:
            result, attempt, sent_at_ms = await self._sends.send(entry, adapter, prepared_send(adapter, entry), future)
        except AckedMeanwhile as acked:  # an earlier copy reached the platform and was acked: not sent again
            entry.prepared = None
            self._resolved(room, entry, acked.ack, acked.sent_at_ms, acked.ack.platform_message_id, acked.attempts)
            return None
        entry.prepared = None  # sent: the rendered body is not needed again, and the room may wait long for its ack
        metrics = m.for_platform(platform)
        metrics.dispatched.inc()  # no event: the message's terminal event carries when and how it was sent
        if future is None:
            if self._mode is OrderingMode.FIXED_DELAY:
                self._prepare_next(room, adapter)
                await asyncio.sleep(self._settings.worker_fixed_delay_ms / 1000)
            answered = self._awaits_ack  # an ack-gated mode without a future: the platform's answer is the ack
            if answered:
                metrics.acked.inc()
            self._terminal(
                room,
                entry,
                EventType.ACKED if answered else EventType.SENT,
                sent_at_ms=sent_at_ms,
                acked_at_ms=now_ms() if answered else None,
                platform_message_id=result.platform_message_id,
                attempt=attempt,
                detail=ANSWERED if answered else None,
            )
            return None
        sent = SendResult(result.platform_message_id, sent_at_ms)
        # Only this copy's ack releases the next message: a new future when another copy's ack resolved this one's.
        by_watermark = adapter.ack_kind is AckKind.WATERMARK
        future = self._router.sent(room.room_id, entry.message_id, sent, by_watermark=by_watermark) or future
        self._prepare_next(room, adapter)
        timeout = self._timeouts.of(platform)
        deadline = self._deadlines.add(timeout.seconds, expire_future, future)
        return Waiting(future, deadline, timeout, result.platform_message_id, sent_at_ms, attempt)

    def _settle(self, room: Room, entry: Entry, waiting: Waiting, ack: Ack | None) -> None:
        """The message sent got its ack, or none before its timeout (``ack`` None)."""
        sent_at_ms = waiting.sent_at_ms
        if ack is None:
            m.for_platform(entry.platform).ack_timeouts.inc()
            self._terminal(
                room,
                entry,
                EventType.ACK_TIMEOUT,
                sent_at_ms=sent_at_ms,
                platform_message_id=waiting.platform_message_id,
                attempt=waiting.attempt,
                detail=f"no ack within {waiting.timeout.seconds:.3f}s",
                timed_out=True,
            )
            return
        latency = max(0.0, (now_ms() - sent_at_ms) / 1000)
        waiting.timeout.observe(latency)
        m.for_platform(entry.platform).ack_latency.observe(latency)
        self._resolved(room, entry, ack, sent_at_ms, waiting.platform_message_id, waiting.attempt)

    def _resolved(
        self, room: Room, entry: Entry, ack: Ack, sent_at_ms: int | None, platform_message_id: str, attempt: int = 1
    ) -> None:
        if ack.status is AckStatus.FAILED:
            # The platform took the message but could not deliver it: a permanent failure of this message.
            raise SendFailed(
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

    def _prepare_next(self, room: Room, adapter: PlatformAdapter) -> None:
        """Render the next few messages of the room while this one waits (sends stay in order)."""
        if not self._prepare_ahead:
            return
        for i, entry in enumerate(room.queue):
            if i > self._prepare_ahead:
                break
            if i == 0 or entry.prepared is not None or entry.platform != adapter.name:
                continue
            try:
                entry.prepared = adapter.prepare(entry.message(), entry.part.partition)
            except PermanentPlatformError as exc:
                entry.prepared = exc

    async def _dead_letter(self, room: Room, entry: Entry, failure: SendFailed) -> None:
        await self._letters.keep(room, entry, failure.reason)
        self._terminal(
            room,
            entry,
            EventType.DEAD_LETTERED,
            sent_at_ms=failure.sent_at_ms,
            platform_message_id=failure.platform_message_id,
            attempt=failure.attempt,
            detail=failure.reason,
        )
        if self._letters.blocking:
            await self._letters.block(room, failure.reason)

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
        if type_ is EventType.SKIPPED_DUPLICATE:
            part.skipped(entry.offset, room.room_id, entry.message_id)
        else:
            part.finished(room.room_id, entry.offset, entry.message_id, type_, type_ is not EventType.DEAD_LETTERED)


def prepared_send(adapter: PlatformAdapter, entry: Entry) -> PreparedSend:
    """``entry`` rendered for ``adapter`` (kept on the entry, or rendered now); ``SendFailed`` when it cannot be."""
    prepared = entry.prepared
    if prepared is None:
        try:
            prepared = adapter.prepare(entry.message(), entry.part.partition)
        except PermanentPlatformError as exc:
            prepared = exc
        entry.prepared = prepared
    if isinstance(prepared, PermanentPlatformError):
        raise SendFailed(prepared.reason)
    return prepared
