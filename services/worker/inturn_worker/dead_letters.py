"""Dead letters and blocked rooms: where a message that cannot be delivered goes, and the 'block' policy.

A dead letter goes to the dead-letter topic and to PostgreSQL (for listing and replay); PostgreSQL
being away is waited out, because a dead letter must not be lost. Under the 'block' policy the room
then waits until an operator releases it (deletes its blocked_rooms row).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import structlog

from inturn.db.store import retrying
from inturn.dead_letters import fitting
from inturn.metrics import worker as m
from inturn.schemas import DeadLetter, EventType
from inturn.settings.worker import WorkerSettings
from inturn_worker.events import EventLog
from inturn_worker.partition import Entry, Partition, PartitionGone, Room

log = structlog.get_logger("inturn.worker.room")


class LetterStore(Protocol):
    """What dead letters and blocked rooms need of PostgreSQL."""

    async def dead_letter(self, letter: DeadLetter) -> None: ...

    async def block(self, room_id: str, reason: str) -> None: ...

    async def is_blocked(self, room_id: str) -> bool: ...


class DeadLetters:
    """Keeps dead letters and, under policy 'block', holds their rooms until an operator releases them."""

    def __init__(self, settings: WorkerSettings, events: EventLog, store: LetterStore) -> None:
        self._topic = settings.topic_messages
        self._events = events
        self._store = store
        self.blocking = settings.worker_dead_letter_policy == "block"

    async def keep(self, room: Room, entry: Entry, reason: str) -> None:
        """Put ``entry``'s original bytes on the dead-letter topic and in PostgreSQL, with ``reason``."""
        letter = DeadLetter.of(
            "worker",
            reason,
            entry.raw,
            room_id=room.room_id,
            message_id=entry.message_id,
            topic=self._topic,
            partition=entry.part.partition,
            offset=entry.offset,
        )
        # On the topic whole when it fits its record limit, else bounded (inturn.dead_letters); PostgreSQL keeps
        # it whole.
        self._events.dead_letter(fitting(letter, entry.raw), room.room_id)
        await retrying(lambda: self._store.dead_letter(letter), "dead_letter", lambda: entry.part.fenced)
        m.DEAD_LETTERS.labels(entry.platform, reason_kind(reason)).inc()
        log.warning("dead_lettered", reason=reason)  # the message's room, id, partition, offset: bound by Delivery

    async def undecodable(self, part: Partition, offset: int, raw: bytes, key: bytes | str | None, reason: str) -> None:
        """A consumed record that is no message: dead letter with the reason, terminal, and the intake goes on."""
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

    async def block(self, room: Room, reason: str) -> None:
        """Policy 'block': the room sends nothing more until an operator releases it."""
        room.blocked = True
        await retrying(lambda: self._store.block(room.room_id, reason), "block_room", lambda: room.part.fenced)

    async def is_blocked(self, room_id: str) -> bool:
        """Policy 'block' only: whether an operator still has to release the room."""
        return await retrying(lambda: self._store.is_blocked(room_id), "is_blocked")

    async def wait_released(self, room: Room, part: Partition) -> None:
        """Policy 'block': the room waits until an operator deletes its blocked_rooms row."""
        log.warning("room_blocked", room_id=room.room_id, partition=part.partition)
        while await retrying(lambda: self._store.is_blocked(room.room_id), "is_blocked", lambda: part.gone):
            if part.gone:
                raise PartitionGone(part.partition)
            await asyncio.sleep(2.0)  # an operator's action is rare; polling every 2 s is plenty
        room.blocked = False


def reason_kind(reason: str) -> str:
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
