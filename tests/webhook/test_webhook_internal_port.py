"""The internal port is served from a thread and event loop of its own (``inturn_webhook.internal``): its probes
answer while the serving loop is busy, and still tell the truth about it.

The application runs as ``inturn webhook`` runs it (``serving_app``: uvicorn, uvloop, the guarded protocol, the
lifespan), in a thread of this process, so that the test can block the serving loop itself: a callback that
sleeps on that loop stands for a flood that leaves it no time. Whether an answer came while the loop was blocked
is read from the order of events (the blocking call records when it ends), not from a duration.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest
import uvicorn

from inturn.settings import KafkaSettings
from inturn.settings.webhook import WebhookSettings
from inturn_devtools.process import free_port
from inturn_devtools.waiting import wait_until
from inturn_webhook.app import serving_app
from inturn_webhook.guard import GuardedProtocol

from .support import webhook_settings_for

pytestmark = pytest.mark.kafka

BLOCK_S = 6.0  # how long the serving loop is blocked
READY_MAX_AGE_S = 1.0  # the readiness window: /readyz fails once the loop has not run for this long


@pytest.fixture
def served(inturn_topics: KafkaSettings) -> Iterator[tuple[uvicorn.Server, WebhookSettings]]:
    """The webhook served as ``inturn webhook`` serves it, from a thread of this process; ready."""
    settings = webhook_settings_for(
        inturn_topics,
        webhook_host="127.0.0.1",
        webhook_port=free_port(),
        webhook_internal_port=free_port(),
        webhook_ready_max_age_s=READY_MAX_AGE_S,
    )
    config = uvicorn.Config(
        serving_app(settings),
        host=settings.webhook_host,
        port=settings.webhook_port,
        loop="uvloop",
        http=GuardedProtocol,
        ws="none",
        lifespan="on",
        log_config=None,
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(
            lambda: _get(settings.webhook_internal_port, "/readyz").status_code == 200,
            60,
            "the webhook ready on its internal port",
            every=0.1,
            ignore=(httpx.TransportError,),
        )
        yield server, settings
    finally:
        server.should_exit = True
        thread.join(30)


def _get(port: int, path: str, timeout: float = 5.0) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=timeout)


def test_the_internal_port_answers_truthfully_while_the_serving_loop_is_blocked(
    served: tuple[uvicorn.Server, WebhookSettings],
) -> None:
    server, settings = served
    internal, public = settings.webhook_internal_port, settings.webhook_port
    loop = server.servers[0].get_loop()  # the serving loop (the public port's)
    blocked: dict[str, float] = {}

    def block() -> None:
        blocked["from"] = time.monotonic()
        time.sleep(BLOCK_S)  # the serving loop does nothing else meanwhile
        blocked["until"] = time.monotonic()

    loop.call_soon_threadsafe(block)
    wait_until(lambda: "from" in blocked, 10, "the serving loop blocked")

    healthz = _get(internal, "/healthz")
    assert healthz.status_code == 200, healthz.text  # alive: the loop has not been stalled for LOOP_STALLED_S
    assert "until" not in blocked  # answered while the serving loop was blocked

    # Readiness tells the truth: the loop has not run for longer than the readiness window.
    stalled: list[httpx.Response] = []

    def not_ready() -> bool:
        answer = _get(internal, "/readyz")
        stalled.append(answer)
        return answer.status_code == 503

    wait_until(not_ready, BLOCK_S, "/readyz 503 while the serving loop is blocked", every=0.1)
    assert "until" not in blocked
    body = orjson.loads(stalled[-1].content)
    assert body["ready"] is False
    assert body["event_loop_stalled_s"] >= READY_MAX_AGE_S
    metrics = _get(internal, "/metrics")
    assert metrics.status_code == 200
    assert b"inturn_webhook_requests_total" in metrics.content
    assert "until" not in blocked  # all of the above while the serving loop was blocked

    # The control: the public port, served by the blocked loop, answers only once the block is over.
    handshake = _get(public, "/webhooks/whatsapp", timeout=BLOCK_S + 30)
    assert handshake.status_code == 403  # no verify token given: refused, but answered
    assert "until" in blocked

    wait_until(lambda: _get(internal, "/readyz").status_code == 200, 30, "/readyz 200 again", every=0.1)
