"""``inturn rooms show|unblock``: what inturn knows about one room (operators)."""

from __future__ import annotations

import argparse
import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import asyncpg

from inturn.db import operator
from inturn.kafka import partition_for
from inturn.settings import load
from inturn.settings.operator import OperatorSettings
from inturn_cli import reach
from inturn_cli.actions import add_actions
from inturn_cli.output import add_json, print_json

ROOM_HELP = "the room's id, as in the messages' room_id (the Kafka key)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rooms`` and its actions."""
    parser = sub.add_parser(
        "rooms",
        help="inspect or release a room",
        description="Show a room's partition, owner, cursor (last terminal message and its outcome), block state "
        "and dead letters from PostgreSQL; with --worker URLs, also what a worker holds in memory for it "
        "(in-flight message, buffered count). Uses INTURN_POSTGRES_*, INTURN_TOPIC_*, and "
        "INTURN_WORKER_ROOM_API_TOKEN for the workers' room API.",
    )
    actions = add_actions(parser)
    show = actions.add_parser("show", help="print what is known about ROOM")
    show.add_argument("room", metavar="ROOM", help=ROOM_HELP)
    show.add_argument(
        "--worker",
        action="append",
        default=[],
        metavar="URL",
        help="a worker's internal HTTP base URL (repeatable), e.g. http://worker-0.worker:8081; asked with "
        "Authorization: Bearer $INTURN_WORKER_ROOM_API_TOKEN",
    )
    add_json(show)
    show.set_defaults(handler=_show)
    unblock = actions.add_parser("unblock", help="release a room stopped by the 'block' dead-letter policy")
    unblock.add_argument("room", metavar="ROOM", help=ROOM_HELP)
    add_json(unblock)
    unblock.set_defaults(handler=_unblock)


async def room_info(settings: OperatorSettings, room: str) -> dict[str, Any]:
    """The room's state in PostgreSQL."""
    async with reach.postgres(settings) as conn:
        state = await operator.room_state(conn, settings.topic_messages, room)
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


def worker_view(url: str, room: str, token: str | None) -> dict[str, Any] | None:
    """What the worker at ``url`` holds for ``room`` (None: not on that worker), or ``{"error": ...}``."""
    target = f"{url.rstrip('/')}/rooms/{urllib.parse.quote(room, safe='')}"
    if not target.startswith(("http://", "https://")):
        return {"error": f"not an http(s) URL: {url}"}
    request = urllib.request.Request(target)  # noqa: S310 (http(s) only, checked above)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=reach.TIMEOUT_S) as resp:  # noqa: S310 (http(s) only, checked above)
            answer: dict[str, Any] = json.loads(resp.read())
            return answer
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            return {"error": "HTTP 401: the worker refused the token; check INTURN_WORKER_ROOM_API_TOKEN"}
        if exc.code == 404:
            if not token:
                return {
                    "error": "HTTP 404: the room is not on this worker, or its room API is off; "
                    "INTURN_WORKER_ROOM_API_TOKEN is not set here (the room API answers only with it)"
                }
            return None  # the room is not on that worker (or its room API is off)
        return {"error": f"HTTP {exc.code}"}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return {"error": f"cannot reach the worker ({reason})"}


def _show(args: argparse.Namespace) -> int:
    settings = load(OperatorSettings)
    info = asyncio.run(room_info(settings, args.room))
    token = settings.worker_room_api_token.get_secret_value() if settings.worker_room_api_token else None
    live = []
    for url in args.worker:
        view = worker_view(url, args.room, token)
        if view is not None:
            live.append({"worker": url, **view})
    info["in_memory"] = live
    if args.json:
        print_json(info)
    else:
        _print_room(info)
    return 0


def _print_room(info: dict[str, Any]) -> None:
    cursor, owner, blocked = info["cursor"], info["owner"], info["blocked"]
    print(f"room {info['room_id']}: partition {info['partition']}")
    if cursor:
        print(
            f"  cursor: message {cursor['message_id']} {cursor['outcome']} at offset {cursor['terminal_offset']} "
            f"(epoch {cursor['epoch']}, {cursor['updated_at']})"
        )
    else:
        print("  cursor: none (no message of this room finished yet)")
    if owner:
        print(f"  owner: {owner['owner']} (epoch {owner['epoch']}, since {owner['claimed_at']})")
    print(f"  blocked: {blocked['reason']} since {blocked['blocked_at']}" if blocked else "  blocked: no")
    letters = info["dead_letters"]
    print(f"  dead letters: {len(letters)}")
    for d in letters:
        state = f"replayed {d['replayed_at']}" if d["replayed_at"] else "pending"
        print(f"    #{d['id']} message {d['message_id']}: {d['reason']} ({d['created_at']}, {state})")
    for live in info["in_memory"]:
        fields = ", ".join(f"{k}={v}" for k, v in live.items() if k != "worker")
        print(f"  in memory at {live['worker']}: {fields}")


def _unblock(args: argparse.Namespace) -> int:
    settings = load(OperatorSettings)

    async def run() -> bool:
        async with reach.postgres(settings) as conn:
            return await operator.release_room(conn, settings.topic_messages, args.room)

    released = asyncio.run(run())
    if args.json:
        print_json({"room_id": args.room, "released": released})
    else:
        print("released" if released else "was not blocked")
    return 0
