"""Schema migrations: the plain SQL files in ``migrations/``, applied in name order, once each.

Services run ``migrate`` at start-up. An advisory lock serialises concurrent starters, and
each file runs in its own transaction together with its row in ``schema_migrations``.
"""

from __future__ import annotations

from importlib import resources

import asyncpg

_LOCK_KEY = 0x696E7475726E  # "inturn"


def _migration_files() -> list[tuple[str, str]]:
    folder = resources.files("inturn.db") / "migrations"
    return sorted((f.name, f.read_text()) for f in folder.iterdir() if f.name.endswith(".sql"))


async def migrate(conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy) -> list[str]:
    """Apply the migrations not yet applied; returns their names (empty when up to date)."""
    applied: list[str] = []
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, "
        "applied_at timestamptz NOT NULL DEFAULT now())"
    )
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for name, sql in _migration_files():
            if name in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", name)
            applied.append(name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return applied


async def applied_versions(conn: asyncpg.Connection) -> list[str]:
    """Names of the migrations applied so far, in order."""
    rows = await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
    return [r["version"] for r in rows]
