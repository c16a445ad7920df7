"""``inturn dlq list|replay``: the worker's dead letters (kept in PostgreSQL and on the dead-letter topic)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import asyncpg

from inturn.db import operator
from inturn.errors import InturnError
from inturn.settings import load
from inturn.settings.operator import OperatorSettings
from inturn_cli import reach
from inturn_cli.actions import add_actions
from inturn_cli.output import add_json, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``dlq`` and its actions."""
    parser = sub.add_parser(
        "dlq",
        help="list or replay dead letters",
        description="Dead letters the worker recorded (permanent send failures, undecodable messages). "
        "'replay' re-publishes the original messages to the messages topic in room order (per room, in the "
        "order they were first consumed) and marks them replayed; a replayed message is sent after whatever "
        "the room received meanwhile. Uses INTURN_POSTGRES_*, INTURN_KAFKA_*, INTURN_TOPIC_MESSAGES.",
    )
    actions = add_actions(parser)
    for name, handler, text in (
        ("list", _list, "print pending dead letters"),
        ("replay", _replay, "re-publish pending dead letters (asks first; --yes to skip the question)"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("--room", metavar="ROOM", help="only this room's dead letters")
        action.add_argument("--limit", type=int, default=1000, help="at most this many (default 1000)")
        add_json(action)
        action.set_defaults(handler=handler)
    replay = actions.choices["replay"]
    replay.add_argument("--dry-run", action="store_true", help="say what would be replayed, change nothing")
    replay.add_argument(
        "--yes",
        action="store_true",
        help="replay without asking (needed when stdin is not a terminal: scripts, CI)",
    )


async def _pending(settings: OperatorSettings, room: str | None, limit: int) -> list[asyncpg.Record]:
    async with reach.postgres(settings) as conn:
        return await operator.pending_dead_letters(conn, room, limit)


def _letter(row: asyncpg.Record) -> dict[str, Any]:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in dict(row).items() if k != "raw"}


def _list(args: argparse.Namespace) -> int:
    settings = load(OperatorSettings)
    rows = asyncio.run(_pending(settings, args.room, args.limit))
    if args.json:
        print_json([_letter(r) for r in rows])
        return 0
    if not rows:
        print("no pending dead letters")
    for row in rows:
        print(
            f"#{row['id']} {row['source']} room={row['room_id']} message={row['message_id']} "
            f"{row['topic']}/{row['partition']}@{row['kafka_offset']} {row['created_at'].isoformat()}: {row['reason']}"
        )
    return 0


def _confirmed(count: int, topic: str) -> bool:
    """Ask on the terminal; refuse (raise) when there is no terminal to ask on."""
    if not sys.stdin.isatty():
        raise InturnError(
            f"not replaying {count} dead letters without a confirmation: stdin is not a terminal; "
            "add --yes (or --dry-run to see them)"
        )
    answer = input(f"replay {count} dead letters to {topic}? [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


def _replay(args: argparse.Namespace) -> int:
    settings = load(OperatorSettings)
    rows = [r for r in asyncio.run(_pending(settings, args.room, args.limit)) if r["source"] == "worker"]
    planned = [{"id": r["id"], "room_id": r["room_id"], "message_id": r["message_id"]} for r in rows]
    if args.dry_run or not rows:
        if args.json:
            print_json({"replayed": [], "would_replay": planned, "topic": settings.topic_messages})
        elif not rows:
            print("no pending dead letters of the worker")
        else:
            for row in rows:
                print(f"would replay {row['id']}: room={row['room_id']} message={row['message_id']}")
        return 0
    if not args.yes and not _confirmed(len(rows), settings.topic_messages):
        print("nothing replayed")
        return 1
    reach.kafka_probe(settings, settings.topic_messages)
    from inturn.kafka import make_producer

    producer = make_producer(settings, **reach.kafka_overrides())
    with reach.kafka(settings, f"producing to {settings.topic_messages}"):
        for row in rows:
            producer.produce(settings.topic_messages, key=row["room_id"], value=bytes(row["raw"]))
        left = producer.flush(30)
    if left:
        raise InturnError(
            f"{left} of {len(rows)} dead letters not confirmed by Kafka at {settings.kafka_bootstrap} within 30 s; "
            "nothing marked replayed (a replay again may send some twice)"
        )

    async def mark() -> None:
        async with reach.postgres(settings) as conn:
            await operator.mark_replayed(conn, [r["id"] for r in rows])

    asyncio.run(mark())
    if args.json:
        print_json({"replayed": planned, "would_replay": [], "topic": settings.topic_messages})
    else:
        print(f"replayed {len(rows)} dead letters")
    return 0
