"""The platform adapters' HTTP side against a real local HTTP server: what a send timeout bounds."""

from __future__ import annotations

import asyncio
import tracemalloc

import orjson
import pytest
from aiohttp import web

from inturn.errors import TransientPlatformError
from inturn.platforms import WhatsAppAdapter
from inturn.platforms.base import json_body
from inturn.schemas import Message
from inturn.settings.worker import PlatformSettings
from tests.support.messages import text_message
from tests.support.receiver import serving


def _platform(answer_after_s: float) -> tuple[web.Application, list[str]]:
    """A WhatsApp-shaped send endpoint answering each request after ``answer_after_s``; the recipients it took."""
    accepted: list[str] = []

    async def send(request: web.Request) -> web.Response:
        body = await request.json()
        accepted.append(body["to"])
        await asyncio.sleep(answer_after_s)  # the platform's own processing time
        return web.json_response({"messages": [{"id": f"wamid.{len(accepted)}"}]})

    app = web.Application()
    app.router.add_post("/{version}/{phone}/messages", send)
    return app, accepted


def _message(n: int) -> Message:
    return text_message(f"room-{n}", f"m-{n}", account="100200300", recipient=f"4917{n:04d}", body="hello")


@pytest.mark.asyncio
async def test_waiting_for_a_pooled_connection_does_not_count_against_the_send_timeout() -> None:
    """Six sends through a pool of one connection, each answered after 0.3 s, with a 0.5 s send timeout: the
    last one waits 1.5 s for the connection, yet none times out — a timeout counted from the wait would
    fire after the platform accepted the message, and the retry would reach the user twice."""
    app, accepted = _platform(answer_after_s=0.3)
    async with serving(app) as url:
        adapter = WhatsAppAdapter(PlatformSettings(whatsapp_base_url=url), pool_size=1, send_timeout_s=0.5)
        try:
            results = await asyncio.gather(*(adapter.send(adapter.prepare(_message(n))) for n in range(6)))
        finally:
            await adapter.close()
    assert sorted(r.platform_message_id for r in results) == sorted(f"wamid.{n}" for n in range(1, 7))
    assert sorted(accepted) == sorted(f"4917{n:04d}" for n in range(6))
    # Each send is stamped when its request left, after its wait for the connection: the stamps spread over
    # the five 0.3 s answers before the last one (all at once if the wait were counted as part of the send).
    stamps = sorted(r.sent_at_ms or 0 for r in results)
    assert stamps[-1] - stamps[0] >= 1_200


@pytest.mark.asyncio
async def test_a_platform_slower_than_the_send_timeout_is_a_transient_error() -> None:
    app, accepted = _platform(answer_after_s=1.0)
    async with serving(app) as url:
        adapter = WhatsAppAdapter(PlatformSettings(whatsapp_base_url=url), pool_size=1, send_timeout_s=0.3)
        try:
            with pytest.raises(TransientPlatformError, match="timed out"):
                await adapter.send(adapter.prepare(_message(1)))
        finally:
            await adapter.close()
    assert accepted == ["49170001"]


def test_rendered_bodies_hold_only_their_own_bytes() -> None:
    """A prepared body is the JSON and no more: ``orjson.dumps`` alone keeps a buffer of 4 KiB or more."""
    body = {"type": "text", "text": {"body": "x" * 1000}}
    assert orjson.loads(json_body(body)) == body
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [json_body(body) for _ in range(200)]
        per_body = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert per_body < 1.5 * len(kept[0])
