"""The worker's PostgreSQL state: partition epochs (fencing), room cursors, dead letters, blocked rooms.

Cursor writes carry the writer's epoch and only land while that epoch is still the partition's
current one; the same round trip tells the worker which of its partitions a newer owner claimed, and which went back
in time: an epoch below the one the worker holds (or none at all) can only come from a store restored from a copy or
failed over to a replica that was behind, since epochs only ever grow. Such an epoch is raised back to the one held
(``Checked.went_back``); another worker holding a higher one raises it further in turn and fences this one.
"""

from __future__ import annotations

import asyncio
from base64 import b64encode
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import asyncpg
import msgspec
import orjson
import structlog

from inturn.metrics import worker as m
from inturn.schemas import DeadLetter

log = structlog.get_logger("inturn.worker.store")

#: What PostgreSQL being away (stopped, restarting, unreachable) looks like through asyncpg.
POSTGRES_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)
T = TypeVar("T")


async def retrying(call: Callable[[], Awaitable[T]], what: str, gone: Callable[[], bool] | None = None) -> T:
    """Run a PostgreSQL call until it succeeds, backing off to 5 s; PostgreSQL being away is waited out,
    because what it records (a dead letter, a cursor) must not be lost. ``gone`` ends the wait early.
    """
    delay = 0.1
    while True:
        try:
            result = await call()
        except POSTGRES_ERRORS as exc:
            m.POSTGRES_UP.set(0)
            log.warning("postgres_call_failed", call=what, error=str(exc), retry_in=delay)
            if gone is not None and gone():
                raise
            await asyncio.sleep(delay)
            delay = min(5.0, delay * 2)
        else:
            return result


class CursorUpdate(msgspec.Struct, frozen=True, gc=False):
    """A room's newest terminal message, and the digests of its last sent message ids (``Recent``).

    ``gc=False``: one per room waits for each checkpoint round, and it holds text, numbers and bytes only (no
    reference cycle can pass through it), so the cyclic collector need not walk it."""

    room_id: str
    partition: int
    offset: int
    message_id: str
    outcome: str
    recent: bytes = b""


@dataclass(frozen=True, slots=True)
class Cursor:
    """A room's cursor as stored: where its partition stands, and the digests of its last sent message ids."""

    partition: int
    offset: int
    recent: bytes


def _storable(text: str | None) -> str | None:
    """``text`` as PostgreSQL can store it: U+0000 becomes U+FFFD."""
    return text.replace("\x00", "\ufffd") if text is not None and "\x00" in text else text


_CLAIM = """
INSERT INTO partition_epochs (messages_topic, partition, epoch, owner)
SELECT $1, p, 1, $3 FROM unnest($2::int[]) AS p
ON CONFLICT (messages_topic, partition)
DO UPDATE SET epoch = partition_epochs.epoch + 1, owner = EXCLUDED.owner, claimed_at = now()
RETURNING partition, epoch
"""

# The updates arrive as one JSON array of [room_id, partition, terminal_offset, message_id, outcome, recent_ids as
# base64] rows: asyncpg
# encodes an array parameter element by element with abstract-class checks on each (25k rooms: 30-70 ms of the
# event loop per checkpoint, every room stalled meanwhile), orjson dumps the same rows in a few milliseconds.
_WRITE_CURSORS = """
INSERT INTO room_cursors AS c
    (messages_topic, room_id, partition, terminal_offset, message_id, outcome, epoch, recent_ids)
SELECT $1, u.room_id, u.partition, u.terminal_offset, u.message_id, u.outcome, e.epoch, u.recent_ids
FROM (
    SELECT r->>0 AS room_id, (r->>1)::int AS partition, (r->>2)::bigint AS terminal_offset,
           r->>3 AS message_id, r->>4 AS outcome, decode(r->>5, 'base64') AS recent_ids
    FROM jsonb_array_elements($2::jsonb) AS r
) AS u
JOIN partition_epochs e ON e.messages_topic = $1 AND e.partition = u.partition
JOIN unnest($3::int[], $4::bigint[]) AS mine(partition, epoch)
     ON mine.partition = u.partition AND mine.epoch = e.epoch
ON CONFLICT (messages_topic, room_id) DO UPDATE
SET partition = EXCLUDED.partition, terminal_offset = EXCLUDED.terminal_offset, message_id = EXCLUDED.message_id,
    outcome = EXCLUDED.outcome, epoch = EXCLUDED.epoch, recent_ids = EXCLUDED.recent_ids, updated_at = now()
WHERE c.partition <> EXCLUDED.partition OR c.terminal_offset < EXCLUDED.terminal_offset
"""

# Locked first, so no claim can come between what the round reads and the cursors it writes.
_EPOCHS = (
    "SELECT partition, epoch, owner FROM partition_epochs WHERE messages_topic = $1 AND partition = ANY($2::int[]) "
    "ORDER BY partition FOR UPDATE"
)

# What a transaction of the store may cost others, set first in each (``set_config(..., true)``: for this transaction
# only, so it holds behind a transaction-pooling proxy too). A worker frozen inside one (SIGSTOP, a stalled VM, a cut
# network) would otherwise hold the epochs' row locks until it thawed or its connection died: every worker given its
# partitions would wait in its claim, and with the claim its whole checkpoint round and the leases of all its
# partitions. PostgreSQL ends a session idle in a transaction past the limit (rolling it back), and a statement
# waiting for a lock past it fails (the round fails and is retried).
_LIMITS = "SELECT set_config('lock_timeout', $1, true), set_config('idle_in_transaction_session_timeout', $1, true)"

# An epoch that went back, raised to the one held: never lowered (a higher one, a newer owner's, stays).
_RAISE = """
INSERT INTO partition_epochs AS e (messages_topic, partition, epoch, owner)
SELECT $1, mine.partition, mine.epoch, $4 FROM unnest($2::int[], $3::bigint[]) AS mine(partition, epoch)
ON CONFLICT (messages_topic, partition)
DO UPDATE SET epoch = EXCLUDED.epoch, owner = EXCLUDED.owner, claimed_at = now()
WHERE e.epoch < EXCLUDED.epoch
"""


@dataclass(frozen=True, slots=True)
class WentBack:
    """A partition whose stored epoch went back in time: the epoch and owner found (0 and None: no row at all)."""

    epoch: int
    owner: str | None


@dataclass(frozen=True, slots=True)
class Checked:
    """What a checkpoint found of the partitions' epochs.

    ``fenced``: a newer owner's epoch is stored (or, after the store went back, another owner's claim under the
    same number): stop. ``went_back``: the stored epoch was below the one held (raised back in the same
    transaction), or equal but another owner's (also in ``fenced``). The cursors of a partition that went back were
    written, but a round must not renew its lease on them: another worker may hold a higher epoch and raise it
    further at its next round."""

    fenced: set[int]
    went_back: dict[int, WentBack]


class Store:
    """PostgreSQL access for one messages topic.

    ``hold_s``: the longest a transaction of this store may wait for a lock, or hold its own while its worker says
    nothing (``_LIMITS``); the worker passes its partitions' lease, which a worker that silent has lost anyway.
    """

    def __init__(self, pool: asyncpg.Pool, messages_topic: str, hold_s: float = 5.0) -> None:
        self._pool = pool
        self._topic = messages_topic
        self._limits = f"{max(1, round(hold_s * 1000))}ms"

    async def claim(self, partitions: list[int], owner: str) -> dict[int, int]:
        """Become the owner of ``partitions``: bump and return their epochs."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.fetchrow(_LIMITS, self._limits)
            rows = await conn.fetch(_CLAIM, self._topic, partitions, owner)
        return {int(r["partition"]): int(r["epoch"]) for r in rows}

    async def checkpoint(self, updates: list[CursorUpdate], epochs: dict[int, int], owner: str) -> Checked:
        """Write cursors under ``epochs`` (held by worker ``owner``); which partitions are fenced and which went
        back in time (``Checked``)."""
        fenced: set[int] = set()
        went_back: dict[int, WentBack] = {}
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.fetchrow(_LIMITS, self._limits)
            rows = await conn.fetch(_EPOCHS, self._topic, list(epochs))
            current = {int(r["partition"]): (int(r["epoch"]), str(r["owner"])) for r in rows}
            for partition, epoch in epochs.items():
                found = current.get(partition)
                if found is None or found[0] < epoch:
                    went_back[partition] = WentBack(found[0], found[1]) if found else WentBack(0, None)
                elif found[0] > epoch:
                    fenced.add(partition)
                elif found[1] != owner:  # our number, another's claim: made after the store lost ours
                    went_back[partition] = WentBack(found[0], found[1])
                    fenced.add(partition)
            raise_ = [p for p in went_back if p not in fenced]
            if raise_:
                await conn.execute(_RAISE, self._topic, raise_, [epochs[p] for p in raise_], owner)
            if updates:
                payload = orjson.dumps(
                    [
                        (u.room_id, u.partition, u.offset, u.message_id, u.outcome, b64encode(u.recent).decode())
                        for u in updates
                        if u.partition not in fenced
                    ]
                )
                await conn.execute(_WRITE_CURSORS, self._topic, payload.decode(), list(epochs), list(epochs.values()))
        return Checked(fenced, went_back)

    async def cursors(self, room_ids: list[str]) -> dict[str, Cursor]:
        """The cursor of each room that has one."""
        rows = await self._pool.fetch(
            "SELECT room_id, partition, terminal_offset, recent_ids FROM room_cursors "
            "WHERE messages_topic = $1 AND room_id = ANY($2::text[])",
            self._topic,
            room_ids,
        )
        return {
            r["room_id"]: Cursor(int(r["partition"]), int(r["terminal_offset"]), bytes(r["recent_ids"])) for r in rows
        }

    async def dead_letter(self, letter: DeadLetter) -> None:
        """Keep a dead letter (also on the dead-letter topic) for listing and replay.

        Its text may come from anywhere (a Kafka key, a platform's error body): U+0000, which PostgreSQL's text
        cannot hold, is stored as U+FFFD. The original bytes are kept whole in ``raw``.
        """
        await self._pool.execute(
            "INSERT INTO dead_letters (source, reason, room_id, message_id, topic, partition, kafka_offset, raw) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            letter.source,
            _storable(letter.reason),
            _storable(letter.room_id),
            _storable(letter.message_id),
            _storable(letter.topic),
            letter.partition,
            letter.offset,
            letter.raw(),
        )

    async def block(self, room_id: str, reason: str) -> None:
        """Stop a room until an operator releases it (policy 'block')."""
        await self._pool.execute(
            "INSERT INTO blocked_rooms (messages_topic, room_id, reason) VALUES ($1, $2, $3) "
            "ON CONFLICT (messages_topic, room_id) DO UPDATE SET reason = EXCLUDED.reason, blocked_at = now()",
            self._topic,
            room_id,
            _storable(reason),
        )

    async def is_blocked(self, room_id: str) -> bool:
        """Whether the room is blocked."""
        row = await self._pool.fetchval(
            "SELECT 1 FROM blocked_rooms WHERE messages_topic = $1 AND room_id = $2", self._topic, room_id
        )
        return row is not None
