"""The messages consumer: batches in, per-room queues out; backpressure; the consumer thread's turn.

All calls on the consumer run on one thread of their own (``consume`` blocks there, one hop per
batch). The thread only consumes, sends the commits and pauses the loop decided, and reports commit
results (``Commits``); it writes no partition. Rebalance callbacks run inside ``consume`` on that
thread and hand their work to the loop (``Rebalances``).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import structlog
from confluent_kafka import Consumer, Message, TopicPartition

from inturn.db.store import Cursor, retrying
from inturn.errors import SchemaError
from inturn.kafka import consume_batch, make_consumer, partition_for
from inturn.metrics import worker as m
from inturn.schemas import Message as InturnMessage
from inturn.schemas import decode, now_ms
from inturn.settings.worker import WorkerSettings
from inturn_worker.checkpoint import Checkpoint
from inturn_worker.dead_letters import DeadLetters
from inturn_worker.partition import Entry, Partitions
from inturn_worker.rebalance import Rebalances
from inturn_worker.room import Rooms

log = structlog.get_logger("inturn.worker.intake")


class CursorSource(Protocol):
    """Where the cursors of rooms first seen since an assignment are read (PostgreSQL)."""

    async def cursors(self, room_ids: list[str]) -> dict[str, Cursor]: ...


class Batches:
    """A consumed batch into its rooms' queues: each record decoded (or dead-lettered), the cursors of rooms
    first seen loaded, their routing checked."""

    def __init__(
        self, settings: WorkerSettings, parts: Partitions, rooms: Rooms, letters: DeadLetters, store: CursorSource
    ) -> None:
        self._parts = parts
        self._rooms = rooms
        self._letters = letters
        self._store = store
        self._mode = str(settings.worker_mode)

    async def take(self, batch: list[Message]) -> None:
        """Queue the batch's messages in their rooms (in offset order within each partition)."""
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
            part = self._parts.of(partition)
            if part is None or part.gone:
                continue  # a record fetched just before its partition left; the new owner reads it again
            part.consumed(offset)
            consumed += 1
            raw = record.value() or b""
            try:
                message = decode(InturnMessage, raw)
            except SchemaError as exc:
                await self._letters.undecodable(part, offset, raw, record.key(), exc.reason)
                continue
            entries.append(Entry.of(part, offset, raw, message, consumed_at))
            if part.cursor(message.room_id) is None:
                new_rooms.setdefault(partition, set()).add(message.room_id)
        if consumed:
            m.CONSUMED.labels(self._mode).inc(consumed)
        if new_rooms:
            self._check_routing(new_rooms)
            await self._load_cursors(new_rooms)
        if any(part.has_misrouted for part in self._parts.values()):  # rare: counted only when some room is
            misrouted = sum(1 for entry in entries if entry.part.is_misrouted(entry.room_id))
            if misrouted:
                m.MISROUTED.inc(misrouted)
        for entry in entries:
            if not entry.part.gone:
                self._rooms.enqueue(entry)

    def _check_routing(self, new_rooms: dict[int, set[str]]) -> None:
        """Rooms first seen since the assignment whose murmur2 partition is another: their producer used another
        partitioner. Logged once per room, counted per message; their acks still come here, because the partition
        travels in the data the platform echoes (docs/architecture.md)."""
        count = self._parts.count
        if count is None:
            return
        for partition, room_ids in new_rooms.items():
            part = self._parts.of(partition)
            for room_id in room_ids:
                expected = partition_for(room_id, count)
                if part is not None and expected != partition and part.misrouted(room_id):
                    log.warning(
                        "room_misrouted",
                        room_id=room_id,
                        partition=partition,
                        murmur2_partition=expected,
                        fix="produce with partitioner=murmur2_random (librdkafka) or the Java client's default",
                    )

    async def _load_cursors(self, new_rooms: dict[int, set[str]]) -> None:
        """Cursors of rooms first seen since the assignment (one query per batch); retried until it works."""
        rooms = sorted(set().union(*new_rooms.values()))
        found = await retrying(lambda: self._store.cursors(rooms), "cursor_load")
        for partition, room_ids in new_rooms.items():
            part = self._parts.of(partition)
            if part is None:
                continue
            for room_id in room_ids:
                cursor = found.get(room_id)
                # A cursor from another partition predates a partition-count change: its offset does not apply,
                # its recent message ids still do.
                offset = cursor.offset if cursor is not None and cursor.partition == partition else -1
                part.cursor_loaded(room_id, offset, cursor.recent if cursor is not None else None)


class Intake:
    """Owns the group consumer of the messages topic and its thread."""

    def __init__(
        self,
        settings: WorkerSettings,
        parts: Partitions,
        batches: Batches,
        rebalances: Rebalances,
        checkpoint: Checkpoint,
    ) -> None:
        self._batch_size = settings.worker_poll_batch
        self._watermarks = (settings.worker_high_watermark, settings.worker_low_watermark)  # (pause at, resume below)
        self._parts = parts
        self._batches = batches
        self._rebalances = rebalances
        self._checkpoint = checkpoint
        self._commits = checkpoint.commits
        self._topic = settings.topic_messages
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="intake")
        self._stopping = False
        self._pauses: tuple[list[TopicPartition], list[TopicPartition]] = ([], [])  # (pause, resume)
        extra: dict[str, Any] = {
            "session.timeout.ms": settings.worker_session_timeout_ms,
            "heartbeat.interval.ms": max(100, settings.worker_session_timeout_ms // 5),
            "max.poll.interval.ms": max(300_000, settings.worker_session_timeout_ms * 2),
            "fetch.wait.max.ms": settings.worker_fetch_wait_max_ms,
            "fetch.min.bytes": settings.worker_fetch_min_bytes,
        }
        if settings.worker_instance_id:
            extra["group.instance.id"] = settings.worker_instance_id
        extra["on_commit"] = self._commits.on_commit
        self._consumer: Consumer = make_consumer(settings, settings.worker_group_id, **extra)

    async def run(self) -> None:
        """Consume until ``stop``; checkpoint rounds alongside (a round that raises ends the worker)."""
        loop = asyncio.get_running_loop()
        self._rebalances.bind(loop)
        self._consumer.subscribe(
            [self._topic],
            on_assign=self._rebalances.on_assign,
            on_revoke=self._rebalances.on_revoke,
            on_lost=self._rebalances.on_lost,
        )
        checkpoints = asyncio.create_task(self._checkpoint.run(), name="checkpoints")
        try:
            while not self._stopping:
                batch = await loop.run_in_executor(self._executor, self._step, self._batch_size)
                if batch:
                    await self._batches.take(batch)
                self._checkpoint.poll_events()
                self._commits.failed_back(self._parts)
                self._backpressure()
                if checkpoints.done():
                    checkpoints.result()  # a round raised: the worker ends (the caller sees the error)
        finally:
            self._checkpoint.stop()
            await checkpoints

    def _step(self, batch_size: int) -> list[Message]:
        """On the consumer thread: send the commits and pauses the loop decided, consume."""
        commits = self._commits.take()
        if commits:
            self._commits.send(self._consumer, commits, asynchronous=True)
        (pause, resume), self._pauses = self._pauses, ([], [])
        if pause:
            self._consumer.pause(pause)
        if resume:
            self._consumer.resume(resume)
        return consume_batch(self._consumer, batch_size, 0.1, linger=0.005)

    def _backpressure(self) -> None:
        """On the loop: each partition decides its pause (``Partition.backpressure``); the thread carries it out."""
        high, low = self._watermarks
        pause, resume = self._pauses
        for part in self._parts.values():
            paused = part.backpressure(high, low)
            if paused is not None:
                (pause if paused else resume).append(TopicPartition(self._topic, part.partition))
        if pause or resume:
            self._pauses = (pause, resume)
            m.PAUSED_PARTITIONS.set(sum(1 for p in self._parts.values() if p.paused))

    def stop(self) -> None:
        """End ``run`` after the current batch."""
        self._stopping = True

    async def drain_all(self) -> None:
        """For shutdown: drain, checkpoint and commit every partition while still a member of the group.

        Done before ``close`` because leaving the group can hand the partitions to another worker while a
        revoke callback inside ``close`` would still be draining them. Not polling meanwhile is safe: the
        group waits for this member (up to max.poll.interval.ms) before it moves anything.
        """
        commits = await self._rebalances.release_all()
        if commits:
            await asyncio.get_running_loop().run_in_executor(
                self._executor, self._commits.send, self._consumer, commits, False
            )

    async def close(self) -> None:
        """Leave the group and close the consumer (after ``drain_all``, the revoke callback has nothing left)."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._consumer.close)
        self._executor.shutdown(wait=False)
