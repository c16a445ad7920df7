"""asyncpg connections from ``PostgresSettings`` (the password kept out of the DSN string)."""

from __future__ import annotations

from typing import Any

import asyncpg

from inturn.settings import PostgresSettings


def connect_kwargs(settings: PostgresSettings) -> dict[str, Any]:
    """Arguments for ``asyncpg.connect``/``create_pool``."""
    kwargs: dict[str, Any] = {"dsn": str(settings.postgres_dsn)}
    if settings.postgres_password is not None:
        kwargs["password"] = settings.postgres_password.get_secret_value()
    return kwargs


def application_name(worker_id: str) -> str:
    """A worker's name in ``pg_stat_activity`` (PostgreSQL keeps the first 63 bytes)."""
    return f"inturn worker {worker_id}"


async def create_pool(settings: PostgresSettings, **overrides: Any) -> asyncpg.Pool:
    """A pool of at most ``postgres_pool_max`` connections."""
    kwargs = {**connect_kwargs(settings), "min_size": 1, "max_size": settings.postgres_pool_max, **overrides}
    pool = await asyncpg.create_pool(**kwargs)
    assert pool is not None
    return pool
