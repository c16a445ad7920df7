"""The cursor checkpoint against PostgreSQL: what it writes, what it refuses, and exactly what comes back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

import asyncpg
import pytest

from inturn.db.migrate import migrate
from inturn.db.store import POSTGRES_ERRORS, Checked, CursorUpdate, Store, WentBack
from inturn.schemas import DeadLetter

pytestmark = pytest.mark.postgres

TOPIC = "inturn.messages"
# Room and message ids are any text up to their length limits: quotes, backslashes, JSON's own syntax, non-ASCII.
ODD_ROOM = 'room "quoted" \\ back, [1,2] {"r": 1} ünïcødé 💬 \t tab'
BIG_OFFSET = 2**53 + 1  # beyond what a double holds exactly


@pytest.fixture
async def pool(pg_schema: str) -> AsyncIterator[asyncpg.Pool]:
    created = await asyncpg.create_pool(pg_schema, min_size=1, max_size=2)
    assert created is not None
    async with created.acquire() as conn:
        await migrate(conn)
    yield created
    await created.close()


async def _cursors(pool: asyncpg.Pool) -> dict[str, tuple[int, int, str, str, int]]:
    rows = await pool.fetch(
        "SELECT room_id, partition, terminal_offset, message_id, outcome, epoch FROM room_cursors "
        "WHERE messages_topic = $1",
        TOPIC,
    )
    return {
        r["room_id"]: (r["partition"], r["terminal_offset"], r["message_id"], r["outcome"], r["epoch"]) for r in rows
    }


async def test_cursors_of_owned_partitions_are_written_exactly(pool: asyncpg.Pool) -> None:
    store = Store(pool, TOPIC)
    epochs = await store.claim([0, 1], "w1")
    checked = await store.checkpoint(
        [
            CursorUpdate(ODD_ROOM, 0, 7, 'msg "7" \\', "acked"),
            CursorUpdate("room-b", 1, BIG_OFFSET, "room-b#1", "ack_timeout"),
        ],
        epochs,
        "w1",
    )
    assert checked == Checked(set(), {})
    assert await _cursors(pool) == {
        ODD_ROOM: (0, 7, 'msg "7" \\', "acked", epochs[0]),
        "room-b": (1, BIG_OFFSET, "room-b#1", "ack_timeout", epochs[1]),
    }


async def test_a_cursor_moves_forward_or_to_another_partition_never_back(pool: asyncpg.Pool) -> None:
    store = Store(pool, TOPIC)
    epochs = await store.claim([0, 1], "w1")
    await store.checkpoint([CursorUpdate("room-a", 0, 10, "a#10", "acked")], epochs, "w1")
    await store.checkpoint([CursorUpdate("room-a", 0, 9, "a#9", "acked")], epochs, "w1")  # behind: ignored
    assert (await _cursors(pool))["room-a"][:3] == (0, 10, "a#10")
    await store.checkpoint([CursorUpdate("room-a", 0, 11, "a#11", "dead_lettered")], epochs, "w1")
    assert (await _cursors(pool))["room-a"][:4] == (0, 11, "a#11", "dead_lettered")
    await store.checkpoint([CursorUpdate("room-a", 1, 3, "a#12", "acked")], epochs, "w1")  # the room moved partitions
    assert (await _cursors(pool))["room-a"][:3] == (1, 3, "a#12")


async def test_a_fenced_partition_writes_nothing_and_is_reported(pool: asyncpg.Pool) -> None:
    store = Store(pool, TOPIC)
    mine = await store.claim([0, 1], "w1")
    await store.claim([1], "w2")  # another worker took partition 1: its epoch moved on
    checked = await store.checkpoint(
        [CursorUpdate("room-a", 0, 5, "a#5", "acked"), CursorUpdate("room-b", 1, 6, "b#6", "acked")], mine, "w1"
    )
    assert checked == Checked({1}, {})
    assert set(await _cursors(pool)) == {"room-a"}


async def test_a_checkpoint_without_updates_still_reports_fencing(pool: asyncpg.Pool) -> None:
    store = Store(pool, TOPIC)
    mine = await store.claim([2], "w1")
    await store.claim([2], "w2")
    assert await store.checkpoint([], mine, "w1") == Checked({2}, {})
    assert await _cursors(pool) == {}


async def _restore(pool: asyncpg.Pool, copy: list[asyncpg.Record]) -> None:
    """Put the partition epochs back as ``copy`` had them: the store restored from a copy taken earlier."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("DELETE FROM partition_epochs WHERE messages_topic = $1", TOPIC)
        for r in copy:
            await conn.execute(
                "INSERT INTO partition_epochs (messages_topic, partition, epoch, owner) VALUES ($1, $2, $3, $4)",
                TOPIC,
                r["partition"],
                r["epoch"],
                r["owner"],
            )


async def _epochs(pool: asyncpg.Pool) -> dict[int, tuple[int, str]]:
    rows = await pool.fetch("SELECT partition, epoch, owner FROM partition_epochs WHERE messages_topic = $1", TOPIC)
    return {r["partition"]: (r["epoch"], r["owner"]) for r in rows}


async def test_an_epoch_that_went_back_is_reported_and_raised_back_to_the_one_held(pool: asyncpg.Pool) -> None:
    store = Store(pool, TOPIC)
    await store.claim([0, 1], "w2")
    copy = await pool.fetch("SELECT partition, epoch, owner FROM partition_epochs WHERE messages_topic = $1", TOPIC)
    mine = await store.claim([0, 1, 2], "w1")  # after the copy: partitions 0 and 1 moved to w1, 2 is new
    await _restore(pool, copy)
    checked = await store.checkpoint(
        [CursorUpdate("room-a", 0, 5, "a#5", "acked"), CursorUpdate("room-c", 2, 9, "c#9", "acked")], mine, "w1"
    )
    assert checked == Checked(set(), {0: WentBack(1, "w2"), 1: WentBack(1, "w2"), 2: WentBack(0, None)})
    assert await _epochs(pool) == {0: (2, "w1"), 1: (2, "w1"), 2: (1, "w1")}
    assert {room: c[:2] for room, c in (await _cursors(pool)).items()} == {"room-a": (0, 5), "room-c": (2, 9)}
    assert await store.checkpoint([], mine, "w1") == Checked(set(), {})  # raised: the next round is a plain one


async def test_a_claim_after_the_store_went_back_that_took_our_number_fences_us(pool: asyncpg.Pool) -> None:
    store = Store(pool, TOPIC)
    copy = await pool.fetch("SELECT partition, epoch, owner FROM partition_epochs WHERE messages_topic = $1", TOPIC)
    mine = await store.claim([0], "w1")  # epoch 1, lost with the restore (the copy has no row)
    await _restore(pool, copy)
    assert await store.claim([0], "w2") == {0: 1}  # w2 is given partition 0 and the same number
    checked = await store.checkpoint([CursorUpdate("room-a", 0, 5, "a#5", "acked")], mine, "w1")
    assert checked == Checked({0}, {0: WentBack(1, "w2")})
    assert await _cursors(pool) == {}, "a fenced worker wrote a cursor"
    assert await _epochs(pool) == {0: (1, "w2")}


async def test_a_higher_epoch_of_another_owner_is_never_lowered(pool: asyncpg.Pool) -> None:
    store = Store(pool, TOPIC)
    mine = await store.claim([0], "w1")
    await store.claim([0], "w2")
    assert await store.checkpoint([], mine, "w1") == Checked({0}, {})
    assert await _epochs(pool) == {0: (2, "w2")}


async def test_a_dead_letter_with_nul_in_its_text_is_stored_with_the_original_bytes_whole(pool: asyncpg.Pool) -> None:
    """A Kafka key or a platform's error body may carry U+0000, which PostgreSQL's text cannot hold."""
    store = Store(pool, TOPIC)
    raw = b'{"room_id": "k\\u0000ey"}\x00\xff'
    letter = DeadLetter.of("worker", "HTTP 400: bad\x00body", raw, room_id="k\x00ey", message_id="m\x00", topic=TOPIC)
    await store.dead_letter(letter)
    await store.block("room-a", "HTTP 400: bad\x00body")
    row = await pool.fetchrow("SELECT reason, room_id, message_id, raw FROM dead_letters")
    assert row is not None
    assert (row["reason"], row["room_id"], row["message_id"]) == ("HTTP 400: bad\ufffdbody", "k\ufffdey", "m\ufffd")
    assert bytes(row["raw"]) == raw
    assert await pool.fetchval("SELECT reason FROM blocked_rooms WHERE room_id = 'room-a'") == "HTTP 400: bad\ufffdbody"


class _FrozenPool:
    """A pool whose worker stops dead (as under SIGSTOP) inside its checkpoint round, just before writing cursors: the
    round's transaction holds the epochs' row locks and the server sees the session idle in it until ``thaw``."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.holding = asyncio.Event()
        self.thaw = asyncio.Event()

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[_FrozenConnection]:
        async with self._pool.acquire() as conn:
            yield _FrozenConnection(conn, self)


class _FrozenConnection:
    def __init__(self, conn: asyncpg.pool.PoolConnectionProxy, pool: _FrozenPool) -> None:
        self._conn = conn
        self._pool = pool

    def transaction(self) -> Any:
        return self._conn.transaction()

    async def fetchrow(self, query: str, *args: object) -> Any:
        return await self._conn.fetchrow(query, *args)

    async def fetch(self, query: str, *args: object) -> Any:
        return await self._conn.fetch(query, *args)

    async def execute(self, query: str, *args: object) -> Any:
        if "room_cursors" in query:
            self._pool.holding.set()
            await self._pool.thaw.wait()
        return await self._conn.execute(query, *args)


async def test_a_worker_frozen_inside_its_round_holds_the_next_owner_up_no_longer_than_its_lease(
    pool: asyncpg.Pool,
) -> None:
    mine = await Store(pool, TOPIC).claim([0], "w1")
    frozen = _FrozenPool(pool)
    w1 = Store(cast(asyncpg.Pool, frozen), TOPIC, hold_s=0.5)  # cast: the stand-in has the part of a pool Store uses
    held = asyncio.create_task(w1.checkpoint([CursorUpdate("room-a", 0, 5, "a#5", "acked")], mine, "w1"))
    await asyncio.wait_for(frozen.holding.wait(), 10)
    # w2 is given partition 0. Without the store's limits its claim waits for w1's row lock as long as w1 stays
    # frozen (here: for ever); with them PostgreSQL ends w1's session half a second into its silence.
    try:
        taken = await asyncio.wait_for(Store(pool, TOPIC, hold_s=10).claim([0], "w2"), 20)
    finally:
        frozen.thaw.set()
    assert taken == {0: mine[0] + 1}
    with pytest.raises(POSTGRES_ERRORS):  # thawed, the round finds its session ended and its transaction rolled back
        await held
    assert await _cursors(pool) == {}, "the frozen round wrote a cursor"
    assert await Store(pool, TOPIC).checkpoint([], mine, "w1") == Checked({0}, {}), "w1 was not fenced"


async def test_a_claim_waits_for_a_row_lock_no_longer_than_its_limit(pool: asyncpg.Pool) -> None:
    await Store(pool, TOPIC).claim([0], "w1")
    async with pool.acquire() as other, other.transaction():  # another session (an operator's, say) holds the row
        await other.execute("SELECT 1 FROM partition_epochs WHERE messages_topic = $1 FOR UPDATE", TOPIC)
        with pytest.raises(asyncpg.LockNotAvailableError):
            await asyncio.wait_for(Store(pool, TOPIC, hold_s=0.5).claim([0], "w2"), 30)
