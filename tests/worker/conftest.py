"""Fixtures of the worker's tests: the scripted platform and the worker's schema."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from inturn.settings import KafkaSettings
from tests.worker.harness import ScriptedPlatform


@pytest.fixture
async def platform(inturn_topics: KafkaSettings) -> AsyncIterator[ScriptedPlatform]:
    """The scripted platform, publishing acks to this test's acks topic."""
    platform = await ScriptedPlatform(inturn_topics).start()
    yield platform
    await platform.stop()
