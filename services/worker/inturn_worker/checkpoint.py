"""The checkpoint: events confirmed in Kafka → room cursors written under each partition's epoch →
offsets committed. In that order, so nothing is marked done before its terminal event is safe.

Each successful round renews the partitions' leases; a partition whose epoch moved on (a newer
owner claimed it) is fenced at once and its rooms stop. While PostgreSQL is unreachable no lease
is renewed, so sending pauses until it is back.

The checkpoint does not schedule itself and commits nothing: the intake runs a round when
``next_round`` says one is due and commits the offsets the round returns. A round is due every
``worker_cursor_flush_ms``, or at once when a room waits for its cursor to be durable (after an ack
timeout or a dead letter; see ``PartitionState.wait_durable``): such a room waits one round, not the
rest of the interval and then a round.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from inturn.metrics import worker as m
from inturn.settings.worker import WorkerSettings
from inturn_worker.events import EventLog
from inturn_worker.partition import PartitionState
from inturn_worker.room import Rooms
from inturn_worker.store import POSTGRES_ERRORS, Store

log = structlog.get_logger("inturn.worker.checkpoint")


class Checkpoint:
    """Checkpoint rounds over the partitions this worker owns."""

    def __init__(
        self,
        settings: WorkerSettings,
        parts: dict[int, PartitionState],
        rooms: Rooms,
        events: EventLog,
        store: Store,
    ) -> None:
        self._settings = settings
        self._parts = parts
        self._rooms = rooms
        self._events = events
        self._store = store
        self._lock = asyncio.Lock()
        self._interval = settings.worker_cursor_flush_ms / 1000
        self._pause = self._interval  # until the next round: the interval, doubled (to 5 s) while rounds fail
        self._last_round = 0.0
        #: Set by a partition a room of which waits for durability (``PartitionState.wait_durable``).
        self.wanted = asyncio.Event()
        self.postgres_ok = False

    async def next_round(self) -> None:
        """Return when a periodic round is due: ``worker_cursor_flush_ms`` after the last one began (longer while
        rounds fail), or as soon as a room waits for durability (not before the failing rounds' pause)."""
        left = self._last_round + self._pause - time.monotonic()
        if left > 0 and self._pause > self._interval:
            await asyncio.sleep(left)  # PostgreSQL or Kafka failing: no round on demand either
            return
        if left > 0 and not self.wanted.is_set():
            with contextlib.suppress(TimeoutError):  # the interval passed: the periodic round is due
                await asyncio.wait_for(self.wanted.wait(), left)

    async def once(self, only: list[PartitionState] | None = None) -> dict[int, int] | None:
        """One round; returns the offsets that may be committed (None when the round failed)."""
        async with self._lock:
            began = time.monotonic()
            if only is None:
                self._last_round = began
                self.wanted.clear()  # a room asking from now on needs a round that begins after this one
            parts = only if only is not None else [p for p in self._parts.values() if not p.gone]
            updates = self._rooms.take_cursor_updates()
            taken = {}
            for part in parts:
                part.rounds_taken += 1
                taken[part.partition] = part.rounds_taken
            committable = {p.partition: c for p in parts if (c := p.offsets.committable()) is not None}
            if not await self._events.confirm(wait_s=10.0):
                log.warning("events_not_confirmed")
                self._rooms.restore_cursor_updates(updates)
                self._failed(only)
                return None
            try:
                await self._claim_missing(parts)
                epochs = {p.partition: p.epoch for p in parts if p.epoch is not None}
                mine = [u for u in updates if u.partition in epochs]
                # Updates of other partitions still ours (draining ones included: their revoke writes them)
                # wait for their own round; those of fenced or released partitions are not ours to write.
                live = {p.partition for p in self._parts.values() if not p.fenced}
                self._rooms.restore_cursor_updates(
                    [u for u in updates if u.partition not in epochs and u.partition in live]
                )
                updates = mine
                fenced = await self._store.checkpoint(mine, epochs) if epochs else set()
            except POSTGRES_ERRORS as exc:
                self.postgres_ok = False
                m.POSTGRES_UP.set(0)
                log.warning("checkpoint_failed", error=str(exc))
                self._rooms.restore_cursor_updates(updates)
                self._failed(only)
                return None
            self.postgres_ok = True
            if only is None:
                self._pause = self._interval
            m.POSTGRES_UP.set(1)
            allowed: dict[int, int] = {}
            for part in parts:
                if part.partition in fenced:
                    self._fence(part)
                elif part.epoch is not None:
                    part.durable(taken[part.partition], began)
                    if part.partition in committable:
                        allowed[part.partition] = committable[part.partition]
            self._publish_gauges()
            return allowed

    def _failed(self, only: list[PartitionState] | None) -> None:
        if only is None:
            self._pause = min(5.0, self._pause * 2)

    async def _claim_missing(self, parts: list[PartitionState]) -> None:
        missing = [p for p in parts if p.epoch is None and not p.gone]
        if missing:
            epochs = await self._store.claim([p.partition for p in missing], self._settings.worker_id)
            for part in missing:
                part.epoch = epochs[part.partition]

    def _fence(self, part: PartitionState) -> None:
        if not part.fenced:
            log.warning("partition_fenced", partition=part.partition, epoch=part.epoch)
            m.FENCED.inc()
        part.fenced = True
        part.wake()

    def _publish_gauges(self) -> None:
        m.ACTIVE_ROOMS.set(self._rooms.active)
        m.STUCK_ROOMS.set(self._rooms.stuck())
        for part in self._parts.values():
            label = str(part.partition)
            m.BUFFERED.labels(label).set(part.offsets.in_flight)
            m.COMMIT_LAG.labels(label).set(part.offsets.lag())
