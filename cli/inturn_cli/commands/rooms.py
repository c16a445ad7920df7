"""``inturn rooms show|unblock``: what inturn knows about one room (operators)."""

from __future__ import annotations

import argparse
import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

import asyncpg

from inturn.db import operator
from inturn.db.pool import connect_kwargs
from inturn.kafka import partition_for
from inturn.settings import load
from inturn.settings.operator import OperatorSettings


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
        state = await operator.room_state(conn, settings.topic_messages, room)
    finally:
        await conn.close()
    cursor = state["cursor"]
    return {
        "room_id": room,
        "partition": partition_for(room, settings.topic_partitions) if not cursor else cursor["partition"],
        "partitions_known": state["partitions_known"],
        "cursor": _row(cursor),
        "owner": _row(state["owner"]),
        "blocked": _row(state["blocked"]),
        "dead_letters": [_row(r) for r in state["dead_letters"]],
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
            with urllib.request.urlopen(f"{url.rstrip('/')}/rooms/{args.room}", timeout=5) as resp:  # noqa: S310 - the operator's own worker URLs (--worker)
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

    async def run() -> bool:
        conn = await asyncpg.connect(**connect_kwargs(settings))
        try:
            return await operator.release_room(conn, settings.topic_messages, args.room)
        finally:
            await conn.close()

    print("released" if asyncio.run(run()) else "was not blocked")
    return 0
