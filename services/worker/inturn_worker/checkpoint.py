"""The checkpoint: events confirmed in Kafka → room cursors written under each partition's epoch →
offsets committed. In that order, so nothing is marked done before its terminal event is safe.

Each successful round renews the partitions' leases; a partition whose epoch moved on (a newer
owner claimed it) is fenced at once and its rooms stop. While PostgreSQL is unreachable no lease
is renewed, so sending pauses until it is back.

The checkpoint only reads partitions: it does not schedule itself, writes no partition and commits
nothing. The intake runs a round when ``next_round`` says one is due, applies the ``Round`` it
returns to the partitions (epochs, durable cursors and leases, fences) and commits its offsets. A round is due every
``worker_cursor_flush_ms``, or at once when a room waits for its cursor to be durable (after an ack
timeout or a dead letter; see ``Partition.wait_durable``): such a room waits one round, not the
rest of the interval and then a round.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import structlog

from inturn.db.store import POSTGRES_ERRORS, CursorUpdate, Store
from inturn.metrics import worker as m
from inturn.settings.worker import WorkerSettings
from inturn_worker.events import EventLog
from inturn_worker.partition import Partition
from inturn_worker.room import Rooms

log = structlog.get_logger("inturn.worker.checkpoint")

#: The room gauges walk every room of the worker (25k rooms: milliseconds of the event loop): at most this often,
#: not every round (every ``worker_cursor_flush_ms``, and at once after each ack timeout).
GAUGES_EVERY_S = 1.0


class Checkpoint:
    """Checkpoint rounds over the partitions this worker owns."""

    def __init__(
        self,
        settings: WorkerSettings,
        parts: dict[int, Partition],
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
        self._gauges_at = -GAUGES_EVERY_S  # monotonic time the gauges were last published
        #: Set by a partition a room of which waits for durability (``Partition.wait_durable``).
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

    async def once(self, only: list[Partition] | None = None) -> Round | None:
        """One round over ``only`` (default: every partition still ours); what it achieved, for the intake to
        apply to the partitions, or None when it failed (nothing was achieved then)."""
        async with self._lock:
            began = time.monotonic()
            hurry = self.wanted.is_set()  # a room waits for this round
            if only is None:
                self._last_round = began
                self.wanted.clear()  # a room asking from now on needs a round that begins after this one
            parts = only if only is not None else [p for p in self._parts.values() if not p.gone]
            pending = {p.partition: p.pending() for p in parts}
            committable = {p.partition: c for p in parts if (c := p.offsets.committable()) is not None}
            if not await self._events.confirm(wait_s=10.0, hurry=hurry):
                log.warning("events_not_confirmed")
                self._failed(only)
                return None
            try:
                missing = [p.partition for p in parts if p.epoch is None and not p.gone]
                claimed = await self._store.claim(missing, self._settings.worker_id) if missing else {}
                epochs = {p.partition: e for p in parts if (e := claimed.get(p.partition, p.epoch)) is not None}
                updates = [u for partition in epochs for u in pending[partition][0]]
                fenced = await self._store.checkpoint(updates, epochs) if epochs else set()
            except POSTGRES_ERRORS as exc:
                self.postgres_ok = False
                m.POSTGRES_UP.set(0)
                log.warning("checkpoint_failed", error=str(exc))
                self._failed(only)
                return None
            self.postgres_ok = True
            if only is None:
                self._pause = self._interval
            m.POSTGRES_UP.set(1)
            durable = {p: pending[p] for p in epochs if p not in fenced}
            allowed = {p: committable[p] for p in durable if p in committable}
            if began - self._gauges_at >= GAUGES_EVERY_S:
                self._gauges_at = began
                self._publish_gauges()
            return Round(began, claimed, fenced, durable, allowed)

    def _failed(self, only: list[Partition] | None) -> None:
        if only is None:
            self._pause = min(5.0, self._pause * 2)

    def _publish_gauges(self) -> None:
        m.ACTIVE_ROOMS.set(self._rooms.active)
        m.STUCK_ROOMS.set(self._rooms.stuck())
        for part in self._parts.values():
            label = str(part.partition)
            m.BUFFERED.labels(label).set(part.offsets.in_flight)
            m.COMMIT_LAG.labels(label).set(part.offsets.lag())


@dataclass(frozen=True, slots=True)
class Round:
    """What one successful checkpoint round achieved."""

    began: float  # monotonic time the round began: leases count from it
    claimed: dict[int, int]  # partitions claimed in this round -> their new epoch
    fenced: set[int]  # partitions a newer owner claimed: ours no more
    durable: dict[int, tuple[list[CursorUpdate], int]]  # partition -> (cursor changes written, changes up to them)
    allowed: dict[int, int]  # partition -> the offset that may be committed

    def apply(self, parts: dict[int, Partition]) -> None:
        """Record the round in the partitions (call at once when ``once`` returns, before anything else runs)."""
        for partition, epoch in self.claimed.items():
            part = parts.get(partition)
            if part is not None and part.epoch is None:
                part.epoch = epoch
        for partition in self.fenced:
            part = parts.get(partition)
            if part is not None and not part.fenced:
                log.warning("partition_fenced", partition=partition, epoch=part.epoch)
                m.FENCED.inc()
                part.fence()
        for partition, (written, upto) in self.durable.items():
            part = parts.get(partition)
            if part is not None:
                part.durable(written, upto, self.began)
