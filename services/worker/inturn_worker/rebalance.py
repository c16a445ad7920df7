"""Rebalances: partitions assigned, revoked and lost, from the consumer thread to the event loop.

confluent-kafka calls these inside ``consume`` on the consumer thread. Each hands its work to the
event loop (claiming epochs, draining rooms, the final checkpoint) and blocks until it is done, so
partitions are released only after in-flight messages had their bounded grace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import structlog
from confluent_kafka import Consumer, TopicPartition

from inturn.metrics import worker as m
from inturn.schemas import now_ms
from inturn.settings.worker import WorkerSettings
from inturn_worker.checkpoint import Checkpoint
from inturn_worker.ends import ReadsBack
from inturn_worker.partition import Partition, Partitions
from inturn_worker.room import Rooms

log = structlog.get_logger("inturn.worker.intake")

T = TypeVar("T")


class Rebalances:
    """What happens to this worker's partitions when the group moves them."""

    def __init__(
        self, settings: WorkerSettings, parts: Partitions, rooms: Rooms, acks: ReadsBack, checkpoint: Checkpoint
    ) -> None:
        self._grace_s = settings.worker_revoke_grace_ms / 1000  # what in-flight messages get on a revoke
        self._lookback_ms = settings.worker_ack_lookback_ms
        self._parts = parts
        self._rooms = rooms
        self._acks = acks  # the acks reader, or the ends reader in front of it (the ack-gated modes)
        self._checkpoint = checkpoint
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop the callbacks hand their work to."""
        self._loop = loop

    def _in_loop(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        assert self._loop is not None, "bind() before the consumer subscribes"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # --- consumer thread ---------------------------------------------------------------------------

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = [tp.partition for tp in partitions]
        if not numbers:
            return  # cooperative rebalances hand out empty increments
        log.info("partitions_assigned", partitions=numbers)
        # librdkafka keeps a partition's pause across a revoke and a re-assignment to the same member, while the new
        # Partition starts unpaused: resume, or a partition paused by backpressure when it was revoked would come
        # back paused for good (seen in the rebalance storm: a worker holding a partition it never read again).
        consumer.resume(partitions)
        self._in_loop(self._assigned(numbers), timeout=60)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = [tp.partition for tp in partitions]
        commits = self._in_loop(self._revoked(numbers, self._grace_s), timeout=self._grace_s + 30)
        if commits:
            self._checkpoint.commits.send(consumer, commits, asynchronous=False)

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._in_loop(self._lost([tp.partition for tp in partitions]), timeout=30)

    # --- event loop ----------------------------------------------------------------------------------

    async def release_all(self) -> list[TopicPartition]:
        """For shutdown: every partition drained, checkpointed and let go; the final commit to send."""
        numbers = list(self._parts)
        if not numbers:
            return []
        log.info("partitions_released", partitions=numbers)
        return await self._revoked(numbers, self._grace_s)

    async def _assigned(self, numbers: list[int]) -> None:
        held = [part for p in numbers if (part := self._parts.of(p)) is not None]
        if held:
            # Assigned again with no revoke or loss of the previous assignment in between: the old Partition's rooms
            # would go on sending beside the new one's, which reads again from the committed offset (two senders of
            # a room in one process). Let the old one go as if lost first (docs/reliability.md, problem 12).
            log.warning("partitions_assigned_again", partitions=[p.partition for p in held])
            await self._fence_and_drop(held)
        since = now_ms() - self._lookback_ms
        parts = self._parts.assign(numbers, self._checkpoint.wanted)
        self._acks.assign(parts, since)
        m.ASSIGNED_PARTITIONS.set(len(self._parts))
        await self._checkpoint.once(parts)  # claims their epochs and grants their first lease

    async def _revoked(self, numbers: list[int], grace: float) -> list[TopicPartition]:
        """Drain the partitions' rooms within ``grace``, checkpoint them, let them go; the final commit."""
        parts = [part for p in numbers if (part := self._parts.of(p)) is not None]
        if not parts:
            return []
        log.info("partitions_revoked", partitions=[p.partition for p in parts])
        for part in parts:
            part.revoke()  # no room starts a send for them from now on
        await self._rooms.drain(parts, grace)
        # The consumer thread is in this callback (or consuming no more): offsets decided for these partitions
        # and not sent yet go out with the final commit, or nothing would ever send them.
        commits = await self._checkpoint.final(parts)
        self._let_go(parts)
        return commits

    async def _lost(self, numbers: list[int]) -> None:
        parts = [part for p in numbers if (part := self._parts.of(p)) is not None]
        log.warning("partitions_lost", partitions=[p.partition for p in parts])
        await self._fence_and_drop(parts)

    async def _fence_and_drop(self, parts: list[Partition]) -> None:
        """Stop ``parts`` at once (fenced: nothing more sent or recorded), end their rooms' loops, let them go."""
        for part in parts:
            part.fence()  # another worker may own it already (or a new assignment here): nothing more from us
        await self._rooms.drain(parts, 0)
        self._let_go(parts)

    def _let_go(self, parts: list[Partition]) -> None:
        self._acks.unassign(parts)
        self._parts.release(parts)
        m.ASSIGNED_PARTITIONS.set(len(self._parts))
