"""Fixtures: a signature-checking callback receiver, settings for simulators pointed at it, an HTTP client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from inturn.settings.sim import SimSettings
from tests.support.receiver import serving

from .support import Hook, quick_settings


@pytest.fixture
async def hook() -> AsyncIterator[Hook]:
    """A signature-checking callback receiver on 127.0.0.1."""
    receiver = Hook()
    app = web.Application()
    app.router.add_post("/webhooks/whatsapp", receiver.handle)
    async with serving(app) as base:
        receiver.url = f"{base}/webhooks/whatsapp"
        yield receiver


@pytest.fixture
def sim_settings(hook: Hook) -> Callable[..., SimSettings]:
    """Settings for a simulator calling ``hook`` back; keyword arguments override (without ``sim_``)."""

    def make(**knobs: Any) -> SimSettings:
        return quick_settings(**{"webhook_url": hook.url, "delivered_delay_ms": 5, **knobs})

    return make


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client for the test."""
    async with aiohttp.ClientSession() as session:
        yield session
