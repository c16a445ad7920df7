"""One messages partition this worker owns, and everything it knows about it, in one object.

A ``Partition`` holds the partition's rooms (their queues), its offsets, its rooms' cursors and
the cursor changes not yet in PostgreSQL, its epoch and lease. Only the event loop writes it, and
only through the methods below: the intake (consumed offsets, assignment, pauses, commits), the
room loops (a message's outcome), the acks reader (caught up) and, with what a checkpoint round
returned, the intake again (epoch, durable, fenced). The checkpoint itself only reads partitions.

A partition may send only while it is owned (not revoked, lost or fenced), its lease is fresh, and
the acks reader has caught up with its acks partition:

- the lease is renewed by each successful checkpoint (events confirmed, cursors written under the
  partition's epoch), so a worker that was frozen, or cut off from PostgreSQL, stops sending before
  it could send something it cannot account for (docs/architecture.md, invariant 4);
- acks published before the assignment (for messages the previous owner sent) are read before the
  first send, so a message acked under the previous owner is recognised and not sent again.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import structlog

from inturn.db.store import CursorUpdate
from inturn.errors import PermanentPlatformError
from inturn.kafka import partition_for
from inturn.platforms import PreparedSend
from inturn.schemas import EventType, Message, decode


@dataclass(slots=True)
class Entry:
    """One consumed message waiting its turn in its room.

    It keeps the consumed bytes and the few fields the loop reads, not the decoded message: a decoded
    message costs twice its bytes, and tens of thousands wait at once. The message is decoded again
    (a few microseconds; it was validated at intake) only to render it, and a dead letter gets the
    original bytes.
    """

    part: Partition
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
    def of(cls, part: Partition, offset: int, raw: bytes, message: Message, consumed_at_ms: int) -> Entry:
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
    """A room's queue (room order = offset order) and its running loop, if any (idle: ``wakeup`` is set)."""

    room_id: str
    part: Partition
    queue: EntryQueue = field(default_factory=EntryQueue)
    task: asyncio.Task[None] | None = None
    wakeup: asyncio.Future[None] | None = None
    in_flight: bool = False
    blocked: bool = False
    head_since: float = 0.0


class PartitionGone(Exception):
    """The partition was revoked, lost or fenced while a room of it was working."""


class PartitionOffsets:
    """Consumed offsets of one partition, in consumption order, and which of them are terminal.

    Rooms finish out of offset order; the committable offset is the lowest consumed offset not terminal
    yet (or one past the highest consumed when all are terminal) — docs/architecture.md, invariant 2.
    """

    __slots__ = ("_done", "_next", "_pending", "committed")

    def __init__(self) -> None:
        self._pending: deque[int] = deque()
        self._done: set[int] = set()
        self._next: int | None = None  # one past the highest offset consumed
        self.committed: int | None = None  # the last offset committed to Kafka

    def consumed(self, offset: int) -> None:
        """Record a newly consumed offset (offsets of one partition arrive in increasing order)."""
        self._pending.append(offset)
        self._next = offset + 1

    def terminal(self, offset: int) -> None:
        """Record that ``offset`` reached its terminal outcome."""
        pending = self._pending
        if pending and pending[0] == offset:
            pending.popleft()
            done = self._done
            while pending and pending[0] in done:
                done.discard(pending.popleft())
        else:
            self._done.add(offset)

    @property
    def in_flight(self) -> int:
        """Consumed offsets not yet terminal (the partition's buffered messages)."""
        return len(self._pending) - len(self._done)

    def committable(self) -> int | None:
        """The offset to commit (Kafka's "next to read"), or None before anything was consumed."""
        if self._pending:
            return self._pending[0]
        return self._next

    def lag(self) -> int:
        """Consumed offsets the commit cannot pass yet."""
        first = self.committable()
        return 0 if first is None or self._next is None else self._next - first


log = structlog.get_logger("inturn.worker.partition")

#: Terminal outcomes after which no ack will confirm the message: a new owner of the partition would send it again,
#: so the room's next message waits until its cursor is durable.
NO_ACK_LEFT = frozenset({EventType.ACK_TIMEOUT, EventType.DEAD_LETTERED})


def message_digest(message_id: str) -> bytes:
    """8 bytes standing for ``message_id`` in a room's recent ids (a false match needs a 64-bit collision among
    the room's last few messages)."""
    return hashlib.blake2b(message_id.encode(), digest_size=8).digest()


def holds_digest(recent: bytes, digest: bytes) -> bool:
    """Whether ``recent`` (8-byte digests, back to back) holds ``digest`` at a digest boundary."""
    at = recent.find(digest)
    while at != -1 and at % 8:
        at = recent.find(digest, at + 1)
    return at != -1


class Partition:
    """One assigned messages partition: its rooms, offsets, cursors, epoch and lease."""

    def __init__(
        self,
        partition: int,
        lease_s: float,
        durability_wanted: asyncio.Event | None = None,
        dedup_window: int = 4,
    ) -> None:
        self.partition = partition
        self.rooms: dict[str, Room] = {}  # rooms with buffered messages or a running loop
        self.offsets = PartitionOffsets()
        self.cursors: dict[str, int] = {}  # room -> its newest terminal offset (-1: none yet)
        #: room -> digests of its last ``dedup_window`` sent message ids (``message_digest``), newest last
        self.recent: dict[str, bytes] = {}
        self._recent_bytes = 8 * dedup_window
        self.updates: dict[str, CursorUpdate] = {}  # cursor changes not yet in PostgreSQL
        self.misrouted: set[str] = set()  # rooms whose messages are here although murmur2(room) names another
        self.epoch: int | None = None
        self.revoked = False
        self.fenced = False
        self.paused = False
        self.acks_ready = False
        self.lock = asyncio.Lock()  # one message in flight per partition ('partition' mode)
        self._durability_wanted = durability_wanted  # the checkpoint's: set, it runs a round at once
        self._lease_s = lease_s
        self._lease_until = 0.0
        self._renewed = asyncio.Event()
        self._sequence = 0  # cursor changes recorded so far
        self._durable = 0  # of those, the ones known to be in PostgreSQL

    @property
    def gone(self) -> bool:
        """Revoked, lost or fenced: nothing more may be sent for it."""
        return self.revoked or self.fenced

    def owned(self) -> bool:
        """Not gone: a send waiting for a connection may still be written (the transport's gate)."""
        return not (self.revoked or self.fenced)

    # --- a message's outcome (room loops, intake) ------------------------------------------------------

    def finished(self, room_id: str, offset: int, message_id: str, outcome: str, sent: bool = True) -> None:
        """A message of ``room_id`` reached its terminal outcome: its offset is done and the room's cursor moves
        to it (to be written by the next checkpoint round); a ``sent`` one joins the room's recent ids, so that
        a second copy of it is not sent (a dead letter does not: replaying it must send it). A fenced partition
        records nothing: another worker owns it now."""
        if self.fenced:
            return
        self.offsets.terminal(offset)
        self.cursors[room_id] = offset
        recent = self.recent.get(room_id, b"")
        if sent and self._recent_bytes:
            recent = (recent + message_digest(message_id))[-self._recent_bytes :]
            self.recent[room_id] = recent
        self.updates[room_id] = CursorUpdate(room_id, self.partition, offset, message_id, outcome, recent)
        self._sequence += 1

    def misroute(self, room_ids: set[str], partitions: int) -> None:
        """Note the rooms among ``room_ids`` (first seen here) whose murmur2 partition is another: their producer used
        another partitioner. Logged once per room, counted per message by the intake; their acks still come here,
        because the partition travels in the data the platform echoes (docs/architecture.md)."""
        for room_id in room_ids:
            expected = partition_for(room_id, partitions)
            if expected != self.partition and room_id not in self.misrouted:
                self.misrouted.add(room_id)
                log.warning(
                    "room_misrouted",
                    room_id=room_id,
                    partition=self.partition,
                    murmur2_partition=expected,
                    fix="produce with partitioner=murmur2_random (librdkafka) or the Java client's default",
                )

    def sent_before(self, room_id: str, message_id: str) -> bool:
        """Whether ``message_id`` is among the room's recent sent messages: a second copy of one of them."""
        recent = self.recent.get(room_id)
        return recent is not None and holds_digest(recent, message_digest(message_id))

    def skipped(self, offset: int) -> None:
        """A message at or below its room's cursor (already done) or undecodable: its offset is done, the
        cursor stays (moving it back would send again what follows)."""
        if not self.fenced:
            self.offsets.terminal(offset)

    # --- checkpoint rounds (the intake applies what a round returned) ----------------------------------

    def pending(self) -> tuple[list[CursorUpdate], int]:
        """The cursor changes not yet written, and how many changes were recorded up to them."""
        return list(self.updates.values()), self._sequence

    def durable(self, written: list[CursorUpdate], upto: int, since: float) -> None:
        """A round that began at ``since`` wrote ``written`` (every change up to ``upto``) under this partition's
        epoch: those changes are durable, and the lease counts from ``since`` (a round that straddled a freeze of
        this process must not grant a fresh lease afterwards)."""
        for update in written:
            if self.updates.get(update.room_id) == update:  # not changed again since the round read it
                del self.updates[update.room_id]
        self._durable = max(self._durable, upto)
        self._lease_until = since + self._lease_s
        self.wake()

    def fence(self) -> None:
        """A newer owner claimed the partition: stop at once, record nothing more."""
        self.fenced = True
        self.wake()

    def revoke(self) -> None:
        """The group takes the partition away: no new send from now on."""
        self.revoked = True
        self.wake()

    def renew(self) -> None:
        """A fresh lease from now (tests, and nothing else: the worker renews only through ``durable``)."""
        self._lease_until = time.monotonic() + self._lease_s
        self.wake()

    def awaits_durable(self, room_id: str) -> bool:
        """Whether the room's latest outcome left no ack behind (it timed out or was dead-lettered) and its cursor
        is not in PostgreSQL yet: the room's next send waits for that (``wait_durable``). Read from the pending cursor
        changes, so it holds across a room whose loop retired in between."""
        update = self.updates.get(room_id)
        return update is not None and update.outcome in NO_ACK_LEFT

    async def wait_durable(self) -> None:
        """Wait until every cursor change recorded so far is in PostgreSQL: the next checkpoint round, which is
        asked to begin as soon as the one under way (if any) is done."""
        target = self._sequence
        if self._durability_wanted is not None:
            self._durability_wanted.set()
        while self._durable < target:
            await self._wait_renewal()

    # --- sending ---------------------------------------------------------------------------------------

    def mark_acks_ready(self) -> None:
        """The acks reader has read this partition's acks up to the assignment."""
        self.acks_ready = True
        self.wake()

    def lease_valid(self) -> bool:
        """Whether the lease is fresh right now."""
        return time.monotonic() < self._lease_until

    def admitted(self) -> bool:
        """True when a send may go out now (``admit`` would return at once)."""
        return not self.gone and self.acks_ready and time.monotonic() < self._lease_until

    async def admit(self) -> None:
        """Return when a send may go out; raise ``PartitionGone`` once it never may."""
        while not self.admitted():
            await self._wait_renewal()

    async def _wait_renewal(self) -> None:
        if self.gone:
            raise PartitionGone(self.partition)
        renewed = self._renewed
        try:
            await asyncio.wait_for(renewed.wait(), self._lease_s)
        except TimeoutError:
            return

    def wake(self) -> None:
        """Wake rooms waiting in ``admit`` or ``wait_durable`` (to see a renewal, a revoke or a fence)."""
        self._renewed.set()
        self._renewed = asyncio.Event()
