"""The worker's room API (``/rooms/{room_id}`` on its internal port) as a stranger meets it: a real worker on real
Kafka and PostgreSQL. It shows room and message ids, so it answers only the bearer of INTURN_WORKER_ROOM_API_TOKEN,
and with no token configured it does not exist."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from inturn.settings import KafkaSettings
from inturn_devtools.waiting import eventually
from inturn_worker.app import Worker
from tests.support.messages import text_message
from tests.worker.harness import ScriptedPlatform, produce, running_worker, worker_settings

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

TOKEN = "room-api-token-of-this-test"


async def get(port: int, path: str, authorization: str | None = None) -> tuple[int, dict[str, Any], str]:
    """GET ``path`` of the worker's internal port: status, JSON body, WWW-Authenticate."""
    headers = {"Authorization": authorization} if authorization is not None else {}
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}{path}", headers=headers) as resp:
        body = await resp.json(content_type=None) if resp.status != 404 else {}
        return resp.status, body, resp.headers.get("WWW-Authenticate", "")


async def internal_port(worker: Worker) -> int:
    """The worker's internal port, once it listens."""
    await eventually(lambda: worker.http_port is not None, 30, "the worker's HTTP server")
    assert worker.http_port is not None
    return worker.http_port


async def answers(port: int, path: str, status: int, authorization: str | None = None) -> bool:
    """Whether ``path`` answers ``status`` now."""
    return (await get(port, path, authorization))[0] == status


async def test_the_room_api_answers_only_the_bearer_of_the_token(
    inturn_topics: KafkaSettings, pg_schema: str, test_id: str
) -> None:
    platform = await ScriptedPlatform(inturn_topics).start()
    platform.behaviour["R"].withhold = True  # no ack: the room's message stays in flight, held in memory
    settings = worker_settings(
        inturn_topics,
        pg_schema,
        platform.url,
        f"g{test_id}",
        worker_room_api_token=TOKEN,
        worker_ack_timeout_ms=60_000,
    )
    produce(inturn_topics, [text_message("R", "r0")])
    try:
        async with running_worker(settings) as worker:
            port = await internal_port(worker)
            await eventually(lambda: answers(port, "/rooms/R", 200, f"Bearer {TOKEN}"), 30, "room R held")
            shown = await get(port, "/rooms/R", f"Bearer {TOKEN}")
            strangers = {
                "no header": await get(port, "/rooms/R"),
                "another token": await get(port, "/rooms/R", "Bearer not-the-token"),
                "the token with a suffix": await get(port, "/rooms/R", f"Bearer {TOKEN}x"),
                "the token without the scheme": await get(port, "/rooms/R", TOKEN),
                "basic auth": await get(port, "/rooms/R", "Basic cm9vbTp0b2tlbg=="),
            }
            unknown_room = await get(port, "/rooms/nobody", f"Bearer {TOKEN}")
            probes = [(await get(port, path))[0] for path in ("/healthz", "/readyz")]
    finally:
        await platform.stop()
    assert shown[1]["room_id"] == "R"
    assert shown[1]["head_message_id"] == "r0"
    for case, (status, body, challenge) in strangers.items():
        assert (case, status, challenge) == (case, 401, 'Bearer realm="inturn-worker"')
        assert "room_id" not in body
    assert unknown_room[0] == 404
    assert probes == [200, 200]  # the probes need no token


async def test_without_a_token_the_room_api_is_off(inturn_topics: KafkaSettings, pg_schema: str, test_id: str) -> None:
    settings = worker_settings(inturn_topics, pg_schema, "http://127.0.0.1:9", f"g{test_id}")
    assert settings.worker_room_api_token is None
    async with running_worker(settings) as worker:
        port = await internal_port(worker)
        await eventually(lambda: answers(port, "/readyz", 200), 30, "the worker ready")
        statuses = [(await get(port, "/rooms/R", authorization))[0] for authorization in (None, "Bearer ", "Bearer x")]
    assert statuses == [404, 404, 404]
