"""The checkpoint: events confirmed in Kafka → room cursors written under each partition's epoch →
offsets committed. In that order, so nothing is marked done before its terminal event is safe.

Each successful round renews the partitions' leases; a partition whose epoch moved on (a newer
owner claimed it) is fenced at once and its rooms stop. While PostgreSQL is unreachable no lease
is renewed, so sending pauses until it is back.

``Checkpoint.run`` schedules the rounds: one every ``worker_cursor_flush_ms``, or at once when a room
waits for its cursor to be durable (after an ack timeout or a dead letter; see ``Partition.wait_durable``):
such a room waits one round, not the rest of the interval and then a round. What a round achieved is
told to each partition through its methods (``claimed``, ``fence``, ``durable``), and each partition
says which offset it commits (``Partition.committing``). The commits themselves are sent by the
consumer thread (``Commits``): it commits what it is given and reports failures back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Mapping
from typing import Protocol

import structlog
from confluent_kafka import Consumer, KafkaError, TopicPartition

from inturn.db.store import POSTGRES_ERRORS, Checked, CursorUpdate, WentBack
from inturn.metrics import worker as m
from inturn.settings.worker import WorkerSettings
from inturn_worker.partition import Partition

log = structlog.get_logger("inturn.worker.checkpoint")

#: The room gauges walk every room of the worker (25k rooms: milliseconds of the event loop): at most this often,
#: not every round (every ``worker_cursor_flush_ms``, and at once after each ack timeout).
GAUGES_EVERY_S = 1.0


class RoomGauges(Protocol):
    """What a round reads of the rooms, for the gauges."""

    @property
    def active(self) -> int: ...

    def stuck(self) -> int: ...


class EventsConfirmed(Protocol):
    """What a round asks of the event log: that every event emitted so far is in Kafka."""

    async def confirm(self, wait_s: float, hurry: bool = False) -> bool: ...

    def poll(self) -> None: ...


class CursorStore(Protocol):
    """What a round asks of PostgreSQL: claim partitions, write cursors under their epochs."""

    async def claim(self, partitions: list[int], owner: str) -> dict[int, int]: ...

    async def checkpoint(self, updates: list[CursorUpdate], epochs: dict[int, int], owner: str) -> Checked: ...


class Commits:
    """Offsets decided on the event loop, sent by the consumer thread, failures reported back.

    Merged, never replaced: a partition records an offset as committed when it decides it, so a decision the
    thread has not sent yet (its turn can block in a rebalance callback for seconds) must not be dropped.
    """

    def __init__(self, topic: str) -> None:
        self._topic = topic
        self._decided: dict[int, TopicPartition] = {}
        self._failures: deque[int] = deque()  # partitions whose commit failed (from the thread)

    def decide(self, parts: Mapping[int, Partition], allowed: dict[int, int]) -> None:
        """On the loop: add the offsets of ``allowed`` each partition commits (``Partition.committing``) to what the
        thread's next turn sends."""
        # A new dict, not an update in place: the thread may be taking the current one right now.
        self._decided = {**self._decided, **self._committing(parts, allowed)}

    def final(self, parts: Mapping[int, Partition], allowed: dict[int, int], leaving: set[int]) -> list[TopicPartition]:
        """For partitions ``leaving`` (their owner sends this itself, the thread's turn would be too late): what was
        decided for them and not sent yet, and what ``allowed`` adds."""
        final = {tp.partition: tp for tp in self.take(leaving)}
        final.update(self._committing(parts, allowed))
        return list(final.values())

    def _committing(self, parts: Mapping[int, Partition], allowed: dict[int, int]) -> dict[int, TopicPartition]:
        return {
            partition: TopicPartition(self._topic, partition, offset)
            for partition, offset in allowed.items()
            if (part := parts.get(partition)) is not None and part.committing(offset)
        }

    def take(self, only: set[int] | None = None) -> list[TopicPartition]:
        """The decided commits (of ``only`` those partitions), removed from what is still to send."""
        if only is None:
            decided, self._decided = self._decided, {}
            return list(decided.values())
        taken = [tp for p, tp in self._decided.items() if p in only]
        self._decided = {p: tp for p, tp in self._decided.items() if p not in only}
        return taken

    def failed_back(self, parts: Mapping[int, Partition]) -> None:
        """On the loop: a partition whose commit failed commits again with the next round."""
        while self._failures:
            part = parts.get(self._failures.popleft())
            if part is not None:
                part.commit_failed()

    def on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """Commit results (served on the consumer thread): failures go back to the loop."""
        failed = [tp.partition for tp in partitions if err is not None or tp.error is not None]
        self._failures.extend(failed)
        if failed:
            log.info("commit_retry", partitions=failed, error=str(err or partitions[0].error))

    def send(self, consumer: Consumer, tps: list[TopicPartition], asynchronous: bool) -> None:
        """On the consumer thread: send a commit the loop decided."""
        try:
            if asynchronous:
                consumer.commit(offsets=tps, asynchronous=True)
            else:
                consumer.commit(offsets=tps, asynchronous=False)
        except Exception as exc:  # noqa: BLE001 - a failed commit is retried by the next checkpoint
            log.warning("commit_failed", error=str(exc))
            self._failures.extend(tp.partition for tp in tps)


class Checkpoint:
    """Checkpoint rounds over the partitions this worker owns, and the commits they allow."""

    def __init__(
        self,
        settings: WorkerSettings,
        parts: Mapping[int, Partition],
        rooms: RoomGauges,
        events: EventsConfirmed,
        store: CursorStore,
    ) -> None:
        self._worker_id = settings.worker_id  # the owner a round claims partitions and writes cursors for
        self._commit_every = settings.worker_commit_interval_ms / 1000
        self._parts = parts
        self._rooms = rooms
        self._events = events
        self._store = store
        self._lock = asyncio.Lock()
        self._interval = settings.worker_cursor_flush_ms / 1000
        self._pause = self._interval  # until the next round: the interval, doubled (to 5 s) while rounds fail
        self._last_round = 0.0
        self._last_commit = 0.0
        self._gauges_at = -GAUGES_EVERY_S  # monotonic time the gauges were last published
        #: Set by a partition a room of which waits for durability (``Partition.wait_durable``).
        self.wanted = asyncio.Event()
        self.commits = Commits(settings.topic_messages)
        self.postgres_ok = False
        self._stopping = False

    async def run(self) -> None:
        """Rounds when due (``next_round``) until ``stop``; their offsets are decided for a commit at most every
        ``worker_commit_interval_ms`` and sent by the consumer thread's next turn."""
        while not self._stopping:
            await self.next_round()
            if self._stopping:
                return
            allowed = await self.once()
            now = time.monotonic()
            if allowed is not None and now - self._last_commit >= self._commit_every:
                self._last_commit = now
                self.commits.decide(self._parts, allowed)

    def poll_events(self) -> None:
        """Serve the event log's delivery reports (what ``confirm`` counts), between consumed batches."""
        self._events.poll()

    def stop(self) -> None:
        """End ``run`` (at once if it waits for the next round)."""
        self._stopping = True
        self.wanted.set()

    async def final(self, parts: list[Partition]) -> list[TopicPartition]:
        """The last round of partitions leaving (drained); the commits their owner sends now: every offset decided
        for them and not sent yet, and what the round allows."""
        allowed = await self.once(parts)
        return self.commits.final(self._parts, allowed or {}, {p.partition for p in parts})

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

    async def once(self, only: list[Partition] | None = None) -> dict[int, int] | None:
        """One round over ``only`` (default: every partition still ours), told to the partitions at once (no other
        round may begin before); the offsets it allows to commit, or None when it failed (nothing was achieved)."""
        async with self._lock:
            began = time.monotonic()
            hurry = self.wanted.is_set()  # a room waits for this round
            if only is None:
                self._last_round = began
                self.wanted.clear()  # a room asking from now on needs a round that begins after this one
            parts = only if only is not None else [p for p in self._parts.values() if not p.gone]
            pending = {p.partition: p.pending() for p in parts}
            committable = {p.partition: c for p in parts if (c := p.committable()) is not None}
            if not await self._events.confirm(wait_s=10.0, hurry=hurry):
                log.warning("events_not_confirmed")
                self._failed(only)
                return None
            try:
                missing = [p.partition for p in parts if p.epoch is None and not p.gone]
                claimed = await self._store.claim(missing, self._worker_id) if missing else {}
                epochs = {p.partition: e for p in parts if (e := claimed.get(p.partition, p.epoch)) is not None}
                updates = [u for partition in epochs for u in pending[partition][0]]
                checked = (
                    await self._store.checkpoint(updates, epochs, self._worker_id) if epochs else Checked(set(), {})
                )
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
            fenced, went_back = checked.fenced, checked.went_back
            self._went_back(went_back, epochs)
            ok = [p for p in epochs if p not in fenced and p not in went_back]
            self._told(began, claimed, fenced, {p: pending[p] for p in ok})
            if began - self._gauges_at >= GAUGES_EVERY_S:
                self._gauges_at = began
                self._publish_gauges()
            return {p: committable[p] for p in ok if p in committable}

    def _went_back(self, went_back: dict[int, WentBack], epochs: dict[int, int]) -> None:
        """Say that PostgreSQL went back in time under these partitions (restored from a copy, or failed over to a
        replica that was behind): their stored epoch was below the one this worker holds (raised back: the
        partition goes on after the next round, which renews its lease) or another owner claimed the same number
        (fenced). Room cursors went back with it; the ones this worker holds are written again as its rooms move on,
        and a later owner of a room whose cursor was lost finds the message done by its ack or sends it again
        (docs/reliability.md, PostgreSQL going back in time)."""
        for partition, found in sorted(went_back.items()):
            raised = found.epoch < epochs[partition]
            log.warning(
                "store_went_back",
                partition=partition,
                epoch_held=epochs[partition],
                epoch_found=found.epoch,
                owner_found=found.owner,
                action="epoch_raised" if raised else "fenced",
            )
            m.STORE_WENT_BACK.inc()

    def _told(
        self,
        began: float,
        claimed: dict[int, int],
        fenced: set[int],
        durable: dict[int, tuple[list[CursorUpdate], int]],
    ) -> None:
        """Tell the partitions what the round achieved: epochs claimed, fences, cursors durable (leases from
        ``began``)."""
        for partition, epoch in claimed.items():
            if (part := self._parts.get(partition)) is not None:
                part.claimed(epoch)
        for partition in fenced:
            part = self._parts.get(partition)
            if part is not None and not part.fenced:
                log.warning("partition_fenced", partition=partition, epoch=part.epoch)
                m.FENCED.inc()
                part.fence()
        for partition, (written, upto) in durable.items():
            if (part := self._parts.get(partition)) is not None:
                part.durable(written, upto, began)

    def _failed(self, only: list[Partition] | None) -> None:
        if only is None:
            self._pause = min(5.0, self._pause * 2)

    def _publish_gauges(self) -> None:
        m.ACTIVE_ROOMS.set(self._rooms.active)
        m.STUCK_ROOMS.set(self._rooms.stuck())
        for part in self._parts.values():
            label = str(part.partition)
            m.BUFFERED.labels(label).set(part.buffered)
            m.COMMIT_LAG.labels(label).set(part.lag())
