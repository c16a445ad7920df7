"""One messages partition this worker owns, and everything it knows about it, in one object.

A ``Partition`` holds the partition's rooms (their queues), its offsets, its rooms' cursors and
the cursor changes not yet in PostgreSQL, its epoch, lease, pause and last commit. It is the one
writer of that state: every attribute is private, and every change is a method named for what
happened (``consumed``, ``cursor_loaded``, ``finished``, ``acks_caught_up``, ``ends_read``, ``claimed``,
``durable``, ``committing``, ``commit_failed``, ``revoke``, ``fence``). Only the event loop calls
them; the consumer thread never touches a partition. The decisions that follow from that state are
made here too: whether a room must wait for durability, when to pause, what offset to commit.

A partition may send only while it is owned (not revoked, lost or fenced), its lease is fresh, and
the acks reader has caught up with its acks partition:

- the lease is renewed by each successful checkpoint (events confirmed, cursors written under the
  partition's epoch), so a worker that was frozen, or cut off from PostgreSQL, stops sending before
  it could send something it cannot account for (docs/architecture.md, invariant 4);
- acks published before the assignment (for messages the previous owner sent) are read before the
  first send, so a message acked under the previous owner is recognised and not sent again;
- in the ack-gated modes, the terminal events of the look-back are read back too (``inturn_worker.ends``): a
  room's cursor is the newer of PostgreSQL's and theirs, so a message that ended without an ack is not sent again
  after newer ones when PostgreSQL went back in time (docs/reliability.md, problem 15).
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from inturn.db.store import CursorUpdate
from inturn.errors import PermanentPlatformError
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
            sys.intern(message.platform),  # a few platforms' names, not a copy per buffered message
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
    """Consumed offsets of one partition, in consumption order, which of them are terminal, and whether their
    number paused consumption.

    Rooms finish out of offset order; the committable offset is the lowest consumed offset not terminal
    yet (or one past the highest consumed when all are terminal) — docs/architecture.md, invariant 2.
    """

    __slots__ = ("_done", "_next", "_pending", "paused")

    def __init__(self) -> None:
        self._pending: deque[int] = deque()
        self._done: set[int] = set()
        self._next: int | None = None  # one past the highest offset consumed
        self.paused = False  # written by ``backpressure`` only

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

    def backpressure(self, high: int, low: int) -> bool | None:
        """Pause at ``high`` buffered messages, resume at ``low``: True pauses now, False resumes now, None neither."""
        buffered = self.in_flight
        if not self.paused and buffered >= high:
            self.paused = True
            return True
        if self.paused and buffered <= low:
            self.paused = False
            return False
        return None


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


class Lease:
    """How long a partition may still send without a successful checkpoint round, and the wake-up of the rooms
    waiting for a renewal (or for a revoke or fence to end their wait).

    The waiters share one timer: tens of thousands of rooms can wait at once (every room of a partition just
    assigned waits for its acks to be read), and ``asyncio.wait_for`` would give each a task and a timer of its own
    (about 16 MiB with 25,000 rooms, most of it kept by the allocator after they woke)."""

    __slots__ = ("_renewed", "_seconds", "_timer", "_until")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._until = 0.0
        self._renewed = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None

    def fresh(self) -> bool:
        """Whether the lease is fresh right now."""
        return time.monotonic() < self._until

    def renew(self, since: float) -> None:
        """Fresh for its length from ``since``; rooms waiting for a renewal wake."""
        self._until = since + self._seconds
        self.wake()

    def wake(self) -> None:
        """Wake whoever waits in ``wait`` (to see a renewal, a revoke or a fence)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._renewed.set()
        self._renewed = asyncio.Event()

    async def wait(self) -> None:
        """Wait for the next ``wake``, at most the lease's length (the first waiter since the last wake starts the
        timer that wakes them all)."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._seconds, self.wake)
        await self._renewed.wait()


class Partition:
    """One assigned messages partition: its rooms, offsets, cursors, epoch, lease, pause and commits."""

    def __init__(
        self,
        partition: int,
        lease_s: float,
        durability_wanted: asyncio.Event | None = None,
        dedup_window: int = 4,
        ends_pending: bool = False,
    ) -> None:
        self._number = partition
        self._rooms: dict[str, Room] = {}  # rooms with buffered messages or a running loop
        self._offsets = PartitionOffsets()
        self._committed: int | None = None  # the last offset decided for a commit to Kafka
        self._cursors: dict[str, int] = {}  # room -> its newest terminal offset (-1: none yet)
        self._ended: dict[str, int] | None = None if ends_pending else {}  # the same from the events topic
        #: room -> digests of its last ``dedup_window`` sent message ids (``message_digest``), newest last
        self._recent: dict[str, bytes] = {}
        self._recent_bytes = 8 * dedup_window
        self._updates: dict[str, CursorUpdate] = {}  # cursor changes not yet in PostgreSQL
        self._misrouted: set[str] = set()  # rooms whose messages are here although murmur2(room) names another
        self._epoch: int | None = None
        self._revoked = False
        self._fenced = False
        self._acks_ready = False
        self._lock = asyncio.Lock()  # one message in flight per partition ('partition' mode)
        self._durability_wanted = durability_wanted  # the checkpoint's: set, it runs a round at once
        self._lease = Lease(lease_s)
        self._sequence = 0  # cursor changes recorded so far
        self._durable = 0  # of those, the ones known to be in PostgreSQL

    @property
    def partition(self) -> int:
        """The partition's number."""
        return self._number

    @property
    def gone(self) -> bool:
        """Revoked, lost or fenced: nothing more may be sent for it."""
        return self._revoked or self._fenced

    @property
    def fenced(self) -> bool:
        """A newer owner claimed it (or the group said it was lost): nothing more is recorded for it."""
        return self._fenced

    @property
    def epoch(self) -> int | None:
        """The epoch this worker claimed it under (None until the first checkpoint round claims it)."""
        return self._epoch

    @property
    def paused(self) -> bool:
        """Whether backpressure paused its consumption."""
        return self._offsets.paused

    @property
    def acks_ready(self) -> bool:
        """Whether its acks (and, when asked for, its ends) were read up to the assignment."""
        return self._acks_ready and self._ended is not None

    @property
    def lock(self) -> asyncio.Lock:
        """One message in flight per partition ('partition' mode)."""
        return self._lock

    @property
    def rooms(self) -> Mapping[str, Room]:
        """Its rooms with buffered messages or a running loop (read only: ``room_for`` and ``retire`` change it)."""
        return self._rooms

    @property
    def buffered(self) -> int:
        """Consumed offsets not yet terminal (the partition's buffered messages)."""
        return self._offsets.in_flight

    @property
    def has_misrouted(self) -> bool:
        """Whether some room of it was produced with another partitioner (``misroute``)."""
        return bool(self._misrouted)

    def is_misrouted(self, room_id: str) -> bool:
        """Whether ``room_id`` was produced here with another partitioner."""
        return room_id in self._misrouted

    def owned(self) -> bool:
        """Not gone: a send waiting for a connection may still be written (the transport's gate)."""
        return not (self._revoked or self._fenced)

    def cursor(self, room_id: str) -> int | None:
        """The room's newest terminal offset, PostgreSQL's or the events topic's (-1: none; None: not loaded)."""
        cursor = self._cursors.get(room_id)
        return cursor if cursor is None or not self._ended else max(cursor, self._ended.get(room_id, -1))

    def committable(self) -> int | None:
        """The offset a commit may reach now (Kafka's "next to read"), or None before anything was consumed."""
        return self._offsets.committable()

    def lag(self) -> int:
        """Consumed offsets the commit cannot pass yet."""
        return self._offsets.lag()

    def consumed(self, offset: int) -> None:
        """A record at ``offset`` was taken from the consumer."""
        self._offsets.consumed(offset)

    def cursor_loaded(self, room_id: str, offset: int, recent: bytes | None) -> None:
        """The room's cursor (and recent sent ids) as PostgreSQL had them, for a room first seen since the
        assignment."""
        self._cursors[room_id] = offset
        if recent:
            self._recent[room_id] = recent

    def misrouted(self, room_id: str) -> bool:
        """Note that ``room_id`` was produced here by another partitioner than murmur2; whether that is news."""
        news = room_id not in self._misrouted
        self._misrouted.add(room_id)
        return news

    def backpressure(self, high: int, low: int) -> bool | None:
        """Pause at ``high`` buffered messages, resume at ``low``: True pauses now, False resumes now, None neither."""
        return self._offsets.backpressure(high, low)

    def room_for(self, room_id: str) -> Room:
        """The room ``room_id`` of this partition, created when it has none."""
        room = self._rooms.get(room_id)
        if room is None:
            room = self._rooms[room_id] = Room(room_id, self)
        return room

    def retire(self, room: Room) -> None:
        """The room's loop ended with nothing buffered: forget the room (a newer one of that id stays)."""
        if not room.queue and self._rooms.get(room.room_id) is room:
            del self._rooms[room.room_id]

    def drop_rooms(self) -> list[str]:
        """Drained (revoked, lost, shut down): forget every room; their ids."""
        room_ids = list(self._rooms)
        self._rooms.clear()
        return room_ids

    def finished(self, room_id: str, offset: int, message_id: str, outcome: str, sent: bool = True) -> None:
        """A message reached its terminal outcome: its offset is done, the room's cursor moves to it, and a ``sent``
        one joins the room's recent ids (a dead letter does not: replaying it must send it). Not once fenced."""
        if self._fenced:
            return
        self._offsets.terminal(offset)
        self._cursors[room_id] = offset
        recent = self._recent.get(room_id, b"")
        if sent and self._recent_bytes:
            recent = (recent + message_digest(message_id))[-self._recent_bytes :]
            self._recent[room_id] = recent
        self._updates[room_id] = CursorUpdate(room_id, self._number, offset, message_id, outcome, recent)
        self._sequence += 1

    def sent_before(self, room_id: str, message_id: str) -> bool:
        """Whether ``message_id`` is among the room's recent sent messages: a second copy of one of them."""
        recent = self._recent.get(room_id)
        return recent is not None and holds_digest(recent, message_digest(message_id))

    def skipped(self, offset: int, room_id: str | None = None, message_id: str = "") -> None:
        """A message already done, or undecodable (no room): its offset is done. Above the room's cursor in PostgreSQL
        (found ended on Kafka, ``ends_read``) the cursor moves up to it, so the store learns it too; never back."""
        if room_id is not None and offset > self._cursors.get(room_id, offset):
            self.finished(room_id, offset, message_id, EventType.SKIPPED_DUPLICATE, sent=False)
        elif not self._fenced:
            self._offsets.terminal(offset)

    def pending(self) -> tuple[list[CursorUpdate], int]:
        """The cursor changes not yet written, and how many changes were recorded up to them."""
        return list(self._updates.values()), self._sequence

    def claimed(self, epoch: int) -> None:
        """A checkpoint round claimed the partition for this worker under ``epoch`` (the first claim holds)."""
        if self._epoch is None:
            self._epoch = epoch

    def durable(self, written: list[CursorUpdate], upto: int, since: float) -> None:
        """A round that began at ``since`` wrote ``written`` (every change up to ``upto``) under its epoch: durable, and
        the lease counts from ``since`` (a round that straddled a freeze must not grant a fresh lease after it)."""
        for update in written:
            if self._updates.get(update.room_id) == update:  # not changed again since the round read it
                del self._updates[update.room_id]
        self._durable = max(self._durable, upto)
        self._lease.renew(since)

    def awaits_durable(self, room_id: str) -> bool:
        """Whether the room's latest outcome left no ack behind (timed out, dead-lettered) and its cursor is not in
        PostgreSQL yet (the room's next send waits for that; read from the pending changes, so it holds across a
        room whose loop retired in between)."""
        update = self._updates.get(room_id)
        return update is not None and update.outcome in NO_ACK_LEFT

    async def wait_durable(self) -> None:
        """Wait until every cursor change recorded so far is in PostgreSQL: the next checkpoint round, which is
        asked to begin as soon as the one under way (if any) is done."""
        target = self._sequence
        if self._durability_wanted is not None:
            self._durability_wanted.set()
        while self._durable < target:
            await self._wait_renewal()

    def committing(self, offset: int) -> bool:
        """Whether ``offset`` (allowed by a round) is to be committed now: past what was committed, and the partition
        not fenced. Recorded as committed when it is (``commit_failed`` undoes that)."""
        if self._fenced or (self._committed is not None and offset <= self._committed):
            return False
        self._committed = offset
        return True

    def commit_failed(self) -> None:
        """Kafka refused a commit of it: the next round's offset is committed again."""
        self._committed = None

    def fence(self) -> None:
        """A newer owner claimed the partition (or the group lost it): stop at once, record nothing more."""
        self._fenced = True
        self._lease.wake()

    def revoke(self) -> None:
        """The group takes the partition away: no new send from now on."""
        self._revoked = True
        self._lease.wake()

    def acks_caught_up(self) -> None:
        """The acks reader has read this partition's acks up to the assignment."""
        self._acks_ready = True
        self._lease.wake()

    def ends_read(self, ended: dict[str, int]) -> None:
        """The ends reader read the partition's terminal events back: room -> the newest offset they end."""
        self._ended = ended
        self._lease.wake()

    def admitted(self) -> bool:
        """True when a send may go out now (``admit`` would return at once); asked per message, so read directly."""
        return (
            not (self._revoked or self._fenced) and self._acks_ready and self._ended is not None and self._lease.fresh()
        )

    async def admit(self) -> None:
        """Return when a send may go out; raise ``PartitionGone`` once it never may."""
        while not self.admitted():
            await self._wait_renewal()

    async def _wait_renewal(self) -> None:
        if self.gone:
            raise PartitionGone(self._number)
        await self._lease.wait()


def lease_seconds(session_timeout_ms: int) -> float:
    """A partition's lease: half the group session timeout, at most 5 s (docs/architecture.md, invariant 4)."""
    return min(session_timeout_ms / 2000, 5.0)


class Partitions(Mapping[int, Partition]):
    """The messages partitions this worker owns, by number: filled and emptied by the rebalances only."""

    def __init__(self, lease_s: float, dedup_window: int = 4, count: int | None = None, ends: bool = False) -> None:
        self._lease_s = lease_s
        self._dedup_window = dedup_window
        self._count = count
        self._ends = ends  # each partition waits for its ends to be read back (``ends_read``)
        self._parts: dict[int, Partition] = {}

    @property
    def count(self) -> int | None:
        """Partitions of the messages topic, as found at start-up (None: unknown, routing is not checked)."""
        return self._count

    def assign(self, numbers: list[int], durability_wanted: asyncio.Event | None) -> list[Partition]:
        """The group assigned ``numbers`` to this worker: a fresh ``Partition`` for each."""
        for number in numbers:
            self._parts[number] = Partition(number, self._lease_s, durability_wanted, self._dedup_window, self._ends)
        return [self._parts[number] for number in numbers]

    def of(self, number: int) -> Partition | None:
        """Partition ``number``, if this worker owns it (``get`` without the ABC's exception per miss)."""
        return self._parts.get(number)

    def release(self, parts: list[Partition]) -> None:
        """``parts`` are this worker's no more (revoked, lost, shut down)."""
        for part in parts:
            self._parts.pop(part.partition, None)

    def __getitem__(self, number: int) -> Partition:
        return self._parts[number]

    def __iter__(self) -> Iterator[int]:
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)
