"""``inturn migrate``: apply PostgreSQL schema migrations (services also do this at start-up)."""

from __future__ import annotations

import argparse
import asyncio

from inturn.db import migrate
from inturn.settings import PostgresSettings, load
from inturn_cli import reach
from inturn_cli.output import add_json, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``migrate``."""
    parser = sub.add_parser(
        "migrate",
        help="apply PostgreSQL schema migrations",
        description="Apply the schema migrations not yet applied to INTURN_POSTGRES_DSN. Idempotent.",
    )
    add_json(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    settings = load(PostgresSettings)

    async def run() -> list[str]:
        # A migration may wait for another process's lock and run long DDL: no statement timeout.
        async with reach.postgres(settings, command_timeout=None) as conn:
            return await migrate(conn)

    applied = asyncio.run(run())
    if args.json:
        print_json({"applied": applied})
    else:
        print(f"applied: {', '.join(applied) or 'none (up to date)'}")
    return 0
