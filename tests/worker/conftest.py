"""Fixtures of the worker's tests: the scripted platform, the worker's schema, and the settings of a worker for the
test that uses them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from tests.worker.harness import ScriptedPlatform, worker_settings


@pytest.fixture
async def platform(inturn_topics: KafkaSettings) -> AsyncIterator[ScriptedPlatform]:
    """The scripted platform, publishing acks to this test's acks topic."""
    platform = await ScriptedPlatform(inturn_topics).start()
    yield platform
    await platform.stop()


@pytest.fixture
def make_settings(
    inturn_topics: KafkaSettings, pg_schema: str, platform: ScriptedPlatform, test_id: str
) -> Callable[..., WorkerSettings]:
    """Settings of a worker on this test's topics, schema and scripted platform, in group ``g<test_id>``; keyword
    arguments override settings (``make_settings(worker_ack_timeout_ms=2000)``)."""

    def make(**overrides: object) -> WorkerSettings:
        return worker_settings(inturn_topics, pg_schema, platform.url, f"g{test_id}", **overrides)

    return make
