"""The messages consumer: batches in, per-room queues out; rebalances, backpressure, checkpoints, commits.

All calls on the consumer run on one thread of their own (``consume`` blocks there, one hop per
batch). Rebalance callbacks run inside ``consume`` on that thread; they hand the asynchronous
part (claiming epochs, draining rooms, the final checkpoint) to the event loop and block until it
is done, so partitions are released only after in-flight messages had their bounded grace.

The thread writes no partition: the loop decides pauses and commits and records them in the
partitions, the thread only carries them out (and hands commit failures back to the loop).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from inturn.db.store import Store, retrying
from inturn.errors import SchemaError
from inturn.kafka import consume_batch, make_consumer
from inturn.metrics import worker as m
from inturn.schemas import DeadLetter, EventType, decode, now_ms
from inturn.schemas import Message as InturnMessage
from inturn.settings.worker import WorkerSettings
from inturn_worker.ack_reader import AckReader
from inturn_worker.checkpoint import Checkpoint
from inturn_worker.events import EventLog
from inturn_worker.partition import Entry, Partition
from inturn_worker.room import Rooms

log = structlog.get_logger("inturn.worker.intake")


class Intake:
    """Owns the group consumer of the messages topic."""

    def __init__(
        self,
        settings: WorkerSettings,
        parts: dict[int, Partition],
        rooms: Rooms,
        events: EventLog,
        store: Store,
        acks: AckReader,
        checkpoint: Checkpoint,
        partition_count: int | None = None,
    ) -> None:
        self._settings = settings
        self._parts = parts
        self._rooms = rooms
        self._events = events
        self._store = store
        self._acks = acks
        self._topic = settings.topic_messages
        self._mode = str(settings.worker_mode)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="intake")
        self._stopping = False
        #: Offsets to commit, per partition: decided by the loop, sent by the thread's next turn. Merged, never
        #: replaced: ``_to_commit`` records an offset as committed when it decides it, so a decision the thread
        #: has not sent yet (its turn can block in a rebalance callback for seconds) must not be dropped.
        self._commits: dict[int, TopicPartition] = {}
        self._commit_failures: deque[int] = deque()  # partitions whose commit failed (from the thread)
        self._pauses: tuple[list[TopicPartition], list[TopicPartition]] = ([], [])  # (pause, resume)
        self._checkpoint = checkpoint
        self._last_commit = 0.0
        #: Partitions of the messages topic (as found at start-up; a change of the count needs a restart anyway,
        #: docs/operations.md). Not asked for in a rebalance callback: a blocking client call there can abort the
        #: process (confluent-kafka's "CallState_get: Assertion `cs != NULL' failed", seen in the rebalance storm).
        self._partition_count = partition_count
        extra: dict[str, Any] = {
            "session.timeout.ms": settings.worker_session_timeout_ms,
            "heartbeat.interval.ms": max(100, settings.worker_session_timeout_ms // 5),
            "max.poll.interval.ms": max(300_000, settings.worker_session_timeout_ms * 2),
        }
        if settings.worker_instance_id:
            extra["group.instance.id"] = settings.worker_instance_id
        extra["on_commit"] = self._on_commit
        self._consumer: Consumer = make_consumer(settings, settings.worker_group_id, **extra)
        self._lease_s = min(settings.worker_session_timeout_ms / 2000, 5.0)

    # --- the loop ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Consume until ``stop``; then leave the group (draining what is in flight)."""
        self._loop = asyncio.get_running_loop()
        self._consumer.subscribe(
            [self._topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        batch_size = self._settings.worker_poll_batch
        checkpoints = asyncio.create_task(self._checkpoints(), name="checkpoints")
        try:
            while not self._stopping:
                batch = await self._loop.run_in_executor(self._executor, self._step, batch_size)
                if batch:
                    await self._take(batch)
                self._events.poll()
                self._after_commits()
                self._backpressure()
                if checkpoints.done():
                    checkpoints.result()  # a round raised: the worker ends (the caller sees the error)
        finally:
            self._checkpoint.wanted.set()  # end a wait for the next round
            await checkpoints

    async def _checkpoints(self) -> None:
        """Checkpoint rounds when due (see ``Checkpoint.next_round``); their offsets are committed by the consumer
        thread's next turn, at most every ``worker_commit_interval_ms``."""
        commit_every = self._settings.worker_commit_interval_ms / 1000
        while not self._stopping:
            await self._checkpoint.next_round()
            if self._stopping:
                return
            allowed = await self._round()
            now = time.monotonic()
            if allowed is not None and now - self._last_commit >= commit_every:
                self._last_commit = now
                self._decide_commits(allowed)

    async def _round(self, only: list[Partition] | None = None) -> dict[int, int] | None:
        """One checkpoint round, recorded in the partitions; the offsets it allows to commit (None: it failed)."""
        result = await self._checkpoint.once(only)
        if result is None:
            return None
        result.apply(self._parts)  # at once: no other round may begin before it is recorded
        return result.allowed

    def _step(self, batch_size: int) -> list[Message]:
        """On the consumer thread: send the commits and pauses the loop decided, consume."""
        commits = self._take_commits()
        if commits:
            self._commit(commits, asynchronous=True)
        (pause, resume), self._pauses = self._pauses, ([], [])
        if pause:
            self._consumer.pause(pause)
        if resume:
            self._consumer.resume(resume)
        return consume_batch(self._consumer, batch_size, 0.1, linger=0.005)

    async def _take(self, batch: list[Message]) -> None:
        consumed_at = now_ms()
        consumed = 0
        new_rooms: dict[int, set[str]] = {}
        entries: list[Entry] = []
        for record in batch:
            if record.error() is not None:
                log.warning("consume_error", error=str(record.error()))
                continue
            partition = record.partition() or 0
            offset = record.offset() or 0
            part = self._parts.get(partition)
            if part is None or part.gone:
                continue  # a record fetched just before its partition left; the new owner reads it again
            part.offsets.consumed(offset)
            consumed += 1
            raw = record.value() or b""
            try:
                message = decode(InturnMessage, raw)
            except SchemaError as exc:
                await self._undecodable(part, offset, raw, record.key(), exc.reason)
                continue
            entries.append(Entry.of(part, offset, raw, message, consumed_at))
            if message.room_id not in part.cursors:
                new_rooms.setdefault(partition, set()).add(message.room_id)
        if consumed:
            m.CONSUMED.labels(self._mode).inc(consumed)
        if new_rooms:
            self._check_routing(new_rooms)
            await self._load_cursors(new_rooms)
        if any(part.misrouted for part in self._parts.values()):  # rare: counted only when some room is misrouted
            misrouted = sum(1 for entry in entries if entry.room_id in entry.part.misrouted)
            if misrouted:
                m.MISROUTED.inc(misrouted)
        for entry in entries:
            if not entry.part.gone:
                self._rooms.enqueue(entry)

    def _check_routing(self, new_rooms: dict[int, set[str]]) -> None:
        """Rooms first seen since the assignment whose partition is not murmur2(room) (``Partition.misroute``)."""
        if self._partition_count is not None:
            for partition, room_ids in new_rooms.items():
                if (part := self._parts.get(partition)) is not None:
                    part.misroute(room_ids, self._partition_count)

    async def _load_cursors(self, new_rooms: dict[int, set[str]]) -> None:
        """Cursors of rooms first seen since the assignment (one query per batch); retried until it works."""
        rooms = sorted(set().union(*new_rooms.values()))
        found = await retrying(lambda: self._store.cursors(rooms), "cursor_load")
        for partition, room_ids in new_rooms.items():
            part = self._parts.get(partition)
            if part is None:
                continue
            for room_id in room_ids:
                cursor = found.get(room_id)
                # A cursor from another partition predates a partition-count change: its offset does not apply,
                # its recent message ids still do.
                part.cursors[room_id] = cursor.offset if cursor is not None and cursor.partition == partition else -1
                if cursor is not None and cursor.recent:
                    part.recent[room_id] = cursor.recent

    async def _undecodable(
        self, part: Partition, offset: int, raw: bytes, key: bytes | str | None, reason: str
    ) -> None:
        """An undecodable message: dead letter with the reason, terminal, and the loop goes on."""
        room = key.decode(errors="replace") if isinstance(key, bytes) else key
        letter = DeadLetter.of(
            "worker",
            f"undecodable message: {reason}",
            raw,
            room_id=room,
            topic=self._topic,
            partition=part.partition,
            offset=offset,
        )
        self._events.dead_letter(letter, room)
        await retrying(lambda: self._store.dead_letter(letter), "dead_letter")
        m.DEAD_LETTERS.labels("unknown", "undecodable").inc()
        self._events.emit(
            EventType.DEAD_LETTERED,
            room or "?",
            f"offset-{offset}",
            "unknown",
            part.partition,
            offset,
            detail=letter.reason,
        )
        part.skipped(offset)

    # --- backpressure and commits (decided on the loop, sent by the consumer thread) -----------------

    def _backpressure(self) -> None:
        high, low = self._settings.worker_high_watermark, self._settings.worker_low_watermark
        pause, resume = self._pauses
        for part in self._parts.values():
            buffered = part.offsets.in_flight
            if not part.paused and buffered >= high:
                part.paused = True
                pause.append(TopicPartition(self._topic, part.partition))
            elif part.paused and buffered <= low:
                part.paused = False
                resume.append(TopicPartition(self._topic, part.partition))
        if pause or resume:
            self._pauses = (pause, resume)
            m.PAUSED_PARTITIONS.set(sum(1 for p in self._parts.values() if p.paused))

    def _decide_commits(self, allowed: dict[int, int]) -> None:
        """On the loop: add what ``allowed`` lets commit to what the thread's next turn sends."""
        # A new dict, not an update in place: the thread may be taking the current one right now.
        self._commits = {**self._commits, **self._to_commit(allowed)}

    def _take_commits(self, only: set[int] | None = None) -> list[TopicPartition]:
        """The decided commits (of ``only`` those partitions), removed from what is still to send."""
        if only is None:
            commits, self._commits = self._commits, {}
            return list(commits.values())
        taken = [tp for p, tp in self._commits.items() if p in only]
        self._commits = {p: tp for p, tp in self._commits.items() if p not in only}
        return taken

    def _to_commit(self, allowed: dict[int, int]) -> dict[int, TopicPartition]:
        """On the loop: the offsets to commit (past what was committed), recorded as committed."""
        tps = {}
        for partition, offset in allowed.items():
            part = self._parts.get(partition)
            if part is None or part.fenced or (part.offsets.committed is not None and offset <= part.offsets.committed):
                continue
            part.offsets.committed = offset
            tps[partition] = TopicPartition(self._topic, partition, offset)
        return tps

    def _after_commits(self) -> None:
        """On the loop: a partition whose commit failed is committed again by the next checkpoint."""
        while self._commit_failures:
            part = self._parts.get(self._commit_failures.popleft())
            if part is not None:
                part.offsets.committed = None

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """Commit results (served on the consumer thread): failures go back to the loop."""
        failed = [tp.partition for tp in partitions if err is not None or tp.error is not None]
        self._commit_failures.extend(failed)
        if failed:
            log.info("commit_retry", partitions=failed, error=str(err or partitions[0].error))

    def _commit(self, tps: list[TopicPartition], asynchronous: bool) -> None:
        """On the consumer thread: send a commit the loop decided."""
        try:
            if asynchronous:
                self._consumer.commit(offsets=tps, asynchronous=True)
            else:
                self._consumer.commit(offsets=tps, asynchronous=False)
        except Exception as exc:  # noqa: BLE001 - a failed commit is retried by the next checkpoint
            log.warning("commit_failed", error=str(exc))
            self._commit_failures.extend(tp.partition for tp in tps)

    # --- rebalances (consumer thread → event loop) -------------------------------------------------

    def _in_loop(self, coro: Any, timeout: float) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = [tp.partition for tp in partitions]
        if not numbers:
            return  # cooperative rebalances hand out empty increments
        log.info("partitions_assigned", partitions=numbers)
        # librdkafka keeps a partition's pause across a revoke and a re-assignment to the same member, while the new
        # Partition starts unpaused: resume, or a partition paused by backpressure when it was revoked would come
        # back paused for good (seen in the rebalance storm: a worker holding a partition it never read again).
        consumer.resume(partitions)
        self._in_loop(self._assigned(numbers), timeout=60)

    async def _assigned(self, numbers: list[int]) -> None:
        since = now_ms() - self._settings.worker_ack_lookback_ms
        for partition in numbers:
            self._parts[partition] = Partition(
                partition, self._lease_s, self._checkpoint.wanted, self._settings.worker_dedup_window
            )
        self._acks.assign([self._parts[p] for p in numbers], since)
        m.ASSIGNED_PARTITIONS.set(len(self._parts))
        await self._round(only=[self._parts[p] for p in numbers])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = [tp.partition for tp in partitions]
        grace = self._settings.worker_revoke_grace_ms / 1000
        commits = self._in_loop(self._revoked(numbers, grace), timeout=grace + 30)
        if commits:
            self._commit(commits, asynchronous=False)

    async def _revoked(self, numbers: list[int], grace: float) -> list[TopicPartition]:
        """Drain the partitions' rooms within ``grace``, checkpoint them, let them go; the final commit."""
        parts = [self._parts[p] for p in numbers if p in self._parts]
        if not parts:
            return []
        log.info("partitions_revoked", partitions=[p.partition for p in parts])
        for part in parts:
            part.revoke()  # no room starts a send for them from now on
        await self._rooms.drain(parts, grace)
        allowed = await self._round(only=parts)
        # The consumer thread is in this callback (or consuming no more): offsets decided for these partitions
        # and not sent yet go out with the final commit, or nothing would ever send them.
        commits = {tp.partition: tp for tp in self._take_commits({p.partition for p in parts})}
        commits.update(self._to_commit(allowed) if allowed else {})
        self._acks.unassign(parts)
        for part in parts:
            self._parts.pop(part.partition, None)
        m.ASSIGNED_PARTITIONS.set(len(self._parts))
        return list(commits.values())

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._in_loop(self._lost([tp.partition for tp in partitions]), timeout=30)

    async def _lost(self, numbers: list[int]) -> None:
        parts = [self._parts[p] for p in numbers if p in self._parts]
        log.warning("partitions_lost", partitions=[p.partition for p in parts])
        for part in parts:
            part.fence()  # lost: another worker may own it already; nothing more from us
        await self._rooms.drain(parts, 0)
        self._acks.unassign(parts)
        for part in parts:
            self._parts.pop(part.partition, None)
        m.ASSIGNED_PARTITIONS.set(len(self._parts))

    # --- shutdown ------------------------------------------------------------------------------------

    def stop(self) -> None:
        """End ``run`` after the current batch."""
        self._stopping = True

    async def drain_all(self) -> None:
        """For shutdown: drain, checkpoint and commit every partition while still a member of the group.

        Done before ``close`` because leaving the group can hand the partitions to another worker while a
        revoke callback inside ``close`` would still be draining them. Not polling meanwhile is safe: the
        group waits for this member (up to max.poll.interval.ms) before it moves anything.
        """
        assert self._loop is not None
        numbers = list(self._parts)
        if not numbers:
            return
        log.info("partitions_released", partitions=numbers)
        commits = await self._revoked(numbers, self._settings.worker_revoke_grace_ms / 1000)
        if commits:
            await self._loop.run_in_executor(self._executor, self._commit, commits, False)

    async def close(self) -> None:
        """Leave the group and close the consumer (after ``drain_all``, the revoke callback has nothing left)."""
        assert self._loop is not None
        await self._loop.run_in_executor(self._executor, self._consumer.close)
        self._executor.shutdown(wait=False)
