"""``inturn dlq list|replay``: the worker's dead letters (kept in PostgreSQL and on the dead-letter topic)."""

from __future__ import annotations

import argparse
import asyncio
import json

import asyncpg

from inturn.db import operator
from inturn.db.pool import connect_kwargs
from inturn.kafka import make_producer
from inturn.settings import load
from inturn.settings.operator import OperatorSettings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``dlq`` and its actions."""
    parser = sub.add_parser(
        "dlq",
        help="list or replay dead letters",
        description="Dead letters the worker recorded (permanent send failures, undecodable messages). "
        "'replay' re-publishes the original messages to the messages topic in room order (per room, in the "
        "order they were first consumed) and marks them replayed; a replayed message is sent after whatever "
        "the room received meanwhile.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, handler, text in (
        ("list", _list, "print pending dead letters (JSON lines)"),
        ("replay", _replay, "re-publish pending dead letters"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("--room", help="only this room")
        action.add_argument("--limit", type=int, default=1000, help="at most this many (default 1000)")
        action.set_defaults(handler=handler)
    actions.choices["replay"].add_argument(
        "--dry-run", action="store_true", help="say what would be replayed, change nothing"
    )


async def _pending(settings: OperatorSettings, room: str | None, limit: int) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(**connect_kwargs(settings))
    try:
        return await operator.pending_dead_letters(conn, room, limit)
    finally:
        await conn.close()


def _list(args: argparse.Namespace) -> int:
    settings = load(OperatorSettings)
    for row in asyncio.run(_pending(settings, args.room, args.limit)):
        print(json.dumps({k: v for k, v in dict(row).items() if k != "raw"}, default=str))
    return 0


def _replay(args: argparse.Namespace) -> int:
    settings = load(OperatorSettings)
    rows = [r for r in asyncio.run(_pending(settings, args.room, args.limit)) if r["source"] == "worker"]
    if args.dry_run:
        for row in rows:
            print(f"would replay {row['id']}: room={row['room_id']} message={row['message_id']}")
        return 0
    producer = make_producer(settings)
    for row in rows:
        producer.produce(settings.topic_messages, key=row["room_id"], value=bytes(row["raw"]))
    left = producer.flush(30)
    if left:
        print(f"{left} dead letters not confirmed by Kafka; nothing marked replayed")
        return 1

    async def mark() -> None:
        conn = await asyncpg.connect(**connect_kwargs(settings))
        try:
            await operator.mark_replayed(conn, [r["id"] for r in rows])
        finally:
            await conn.close()

    asyncio.run(mark())
    print(f"replayed {len(rows)} dead letters")
    return 0
