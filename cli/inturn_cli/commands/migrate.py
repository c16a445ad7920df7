"""``inturn migrate``: apply PostgreSQL schema migrations (services also do this at start-up)."""

from __future__ import annotations

import argparse
import asyncio

import asyncpg

from inturn.db import migrate
from inturn.db.pool import connect_kwargs
from inturn.settings import PostgresSettings, load


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``migrate``."""
    parser = sub.add_parser(
        "migrate",
        help="apply PostgreSQL schema migrations",
        description="Apply the schema migrations not yet applied to INTURN_POSTGRES_DSN. Idempotent.",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    settings = load(PostgresSettings)

    async def run() -> list[str]:
        conn = await asyncpg.connect(**connect_kwargs(settings))
        try:
            return await migrate(conn)
        finally:
            await conn.close()

    applied = asyncio.run(run())
    print(f"applied: {', '.join(applied) or 'none (up to date)'}")
    return 0
