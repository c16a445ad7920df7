"""What operators read and change in PostgreSQL (``inturn rooms``, ``inturn dlq``): a room's cursor, its partition's
owner, its block and its dead letters. The tables are the migrations' (``inturn.db.migrations``)."""

from __future__ import annotations

from typing import Any

import asyncpg


async def owned_partitions(conn: asyncpg.Connection, messages_topic: str, owner: str) -> set[int]:
    """The partitions of ``messages_topic`` whose current epoch belongs to worker ``owner``."""
    rows = await conn.fetch(
        "SELECT partition FROM partition_epochs WHERE messages_topic = $1 AND owner = $2", messages_topic, owner
    )
    return {int(r["partition"]) for r in rows}


async def room_state(conn: asyncpg.Connection, messages_topic: str, room_id: str) -> dict[str, Any]:
    """The room's rows: ``partitions_known`` (partitions ever claimed), ``cursor``, ``owner`` (of the cursor's
    partition), ``blocked`` and ``dead_letters``, each a record or None (a list for dead letters)."""
    partitions = await conn.fetchval("SELECT count(*) FROM partition_epochs WHERE messages_topic = $1", messages_topic)
    cursor = await conn.fetchrow(
        "SELECT partition, terminal_offset, message_id, outcome, epoch, updated_at FROM room_cursors "
        "WHERE messages_topic = $1 AND room_id = $2",
        messages_topic,
        room_id,
    )
    owner = None
    if cursor is not None:
        owner = await conn.fetchrow(
            "SELECT owner, epoch, claimed_at FROM partition_epochs WHERE messages_topic = $1 AND partition = $2",
            messages_topic,
            cursor["partition"],
        )
    blocked = await conn.fetchrow(
        "SELECT reason, blocked_at FROM blocked_rooms WHERE messages_topic = $1 AND room_id = $2",
        messages_topic,
        room_id,
    )
    letters = await conn.fetch(
        "SELECT id, message_id, reason, created_at, replayed_at FROM dead_letters WHERE room_id = $1 "
        "ORDER BY partition, kafka_offset, id",
        room_id,
    )
    return {
        "partitions_known": partitions,
        "cursor": cursor,
        "owner": owner,
        "blocked": blocked,
        "dead_letters": list(letters),
    }


async def release_room(conn: asyncpg.Connection, messages_topic: str, room_id: str) -> bool:
    """Delete the room's block (policy 'block'); False when it was not blocked."""
    status = await conn.execute(
        "DELETE FROM blocked_rooms WHERE messages_topic = $1 AND room_id = $2", messages_topic, room_id
    )
    return str(status).endswith(" 1")


async def pending_dead_letters(conn: asyncpg.Connection, room_id: str | None, limit: int) -> list[asyncpg.Record]:
    """Dead letters not replayed yet (of one room, or all), in room order: per room, as first consumed."""
    return list(
        await conn.fetch(
            "SELECT id, source, reason, room_id, message_id, topic, partition, kafka_offset, raw, created_at "
            "FROM dead_letters WHERE replayed_at IS NULL AND ($1::text IS NULL OR room_id = $1) "
            "ORDER BY room_id, partition, kafka_offset, id LIMIT $2",
            room_id,
            limit,
        )
    )


async def mark_replayed(conn: asyncpg.Connection, ids: list[int]) -> None:
    """Mark these dead letters replayed."""
    await conn.execute("UPDATE dead_letters SET replayed_at = now() WHERE id = ANY($1::bigint[])", ids)
