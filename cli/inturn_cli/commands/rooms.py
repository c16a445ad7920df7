"""``inturn rooms show|unblock``: what inturn knows about one room (operators)."""

from __future__ import annotations

import argparse
import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

import asyncpg

from inturn.db.pool import connect_kwargs
from inturn.kafka import partition_for
from inturn.settings import KafkaSettings, PostgresSettings, load


class OperatorSettings(KafkaSettings, PostgresSettings):
    """Kafka and PostgreSQL, as the operator commands need both."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rooms`` and its actions."""
    parser = sub.add_parser(
        "rooms",
        help="inspect or release a room",
        description="Show a room's partition, owner, cursor (last terminal message and its outcome), block state "
        "and dead letters from PostgreSQL; with --worker URLs, also what a worker holds in memory for it "
        "(in-flight message, buffered count). Uses INTURN_POSTGRES_*, INTURN_TOPIC_*.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser("show", help="print what is known about ROOM as JSON")
    show.add_argument("room")
    show.add_argument(
        "--worker",
        action="append",
        default=[],
        metavar="URL",
        help="a worker's HTTP base URL (repeatable), e.g. http://worker-0:8081",
    )
    show.set_defaults(handler=_show)
    unblock = actions.add_parser("unblock", help="release a room stopped by the 'block' dead-letter policy")
    unblock.add_argument("room")
    unblock.set_defaults(handler=_unblock)


async def room_info(settings: OperatorSettings, room: str) -> dict[str, Any]:
    """The room's state in PostgreSQL."""
    conn = await asyncpg.connect(**connect_kwargs(settings))
    try:
        topic = settings.topic_messages
        partitions = await conn.fetchval("SELECT count(*) FROM partition_epochs WHERE messages_topic = $1", topic)
        cursor = await conn.fetchrow(
            "SELECT partition, terminal_offset, message_id, outcome, epoch, updated_at FROM room_cursors "
            "WHERE messages_topic = $1 AND room_id = $2",
            topic,
            room,
        )
        owner = None
        if cursor is not None:
            owner = await conn.fetchrow(
                "SELECT owner, epoch, claimed_at FROM partition_epochs WHERE messages_topic = $1 AND partition = $2",
                topic,
                cursor["partition"],
            )
        blocked = await conn.fetchrow(
            "SELECT reason, blocked_at FROM blocked_rooms WHERE messages_topic = $1 AND room_id = $2", topic, room
        )
        letters = await conn.fetch(
            "SELECT id, message_id, reason, created_at, replayed_at FROM dead_letters WHERE room_id = $1 "
            "ORDER BY partition, kafka_offset, id",
            room,
        )
    finally:
        await conn.close()
    return {
        "room_id": room,
        "partition": partition_for(room, settings.topic_partitions) if not cursor else cursor["partition"],
        "partitions_known": partitions,
        "cursor": _row(cursor),
        "owner": _row(owner),
        "blocked": _row(blocked),
        "dead_letters": [_row(r) for r in letters],
    }


def _row(record: asyncpg.Record | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in dict(record).items()}


def _show(args: argparse.Namespace) -> int:
    settings = load(OperatorSettings)
    info = asyncio.run(room_info(settings, args.room))
    live = []
    for url in args.worker:
        try:
            with urllib.request.urlopen(f"{url.rstrip('/')}/rooms/{args.room}", timeout=5) as resp:  # noqa: S310
                live.append({"worker": url, **json.loads(resp.read())})
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                live.append({"worker": url, "error": f"HTTP {exc.code}"})
        except (urllib.error.URLError, OSError) as exc:
            live.append({"worker": url, "error": str(exc)})
    info["in_memory"] = live
    print(json.dumps(info, indent=2, default=str))
    return 0


def _unblock(args: argparse.Namespace) -> int:
    settings = load(OperatorSettings)

    async def run() -> str:
        conn = await asyncpg.connect(**connect_kwargs(settings))
        try:
            return str(
                await conn.execute(
                    "DELETE FROM blocked_rooms WHERE messages_topic = $1 AND room_id = $2",
                    settings.topic_messages,
                    args.room,
                )
            )
        finally:
            await conn.close()

    status = asyncio.run(run())
    print("released" if status.endswith(" 1") else "was not blocked")
    return 0
