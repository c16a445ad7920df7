"""What the simulator tests share: a callback receiver that checks Meta's signature itself, the routes of the other
platforms' receivers, the settings of a test's simulator, and helpers."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from inturn.schemas import encode_callback_data
from inturn.settings.sim import SimSettings
from inturn_sim.run import RunningSim
from tests.support.receiver import serving

APP_SECRET = "test-app-secret"
TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def quick_settings(**values: Any) -> SimSettings:
    """A test simulator's settings (names without ``sim_``): ``values`` over quick defaults (sends accepted in
    10 ms, no rate limit, a failed callback retried after 10 ms) and this module's secret and token."""
    defaults: dict[str, Any] = {
        "app_secret": APP_SECRET,
        "access_token": TOKEN,
        "latency_median_ms": 10,
        "latency_p99_ms": 10,
        "rate_limit_per_s": 0,
        "callback_backoff_ms": 10,
    }
    return SimSettings(**{f"sim_{name}": value for name, value in {**defaults, **values}.items()})


def meta_signed(request: web.Request, raw: bytes, secret: str) -> bool:
    """Whether ``raw``, the body of ``request``, carries Meta's signature under ``secret`` (X-Hub-Signature-256),
    checked here without the simulator's or the webhook's code."""
    expected = "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    return hmac.compare_digest(request.headers.get("X-Hub-Signature-256", ""), expected)


class MetaAndTwilioHooks:
    """A receiver of Meta's callbacks (Messenger, Instagram) at /webhooks/meta (``meta_hook``) and Twilio's at
    /webhooks/twilio (``twilio_hook``), and the settings of a simulator that calls it back, signing with ``secret``
    and ``twilio_token`` (``sim``: more settings of it, names without ``sim_``)."""

    def __init__(self, secret: str, token: str, twilio_token: str, **sim: Any) -> None:
        self.base = ""  # its base URL, once serving
        self._sim = {"app_secret": secret, "access_token": token, "twilio_auth_token": twilio_token, **sim}

    async def meta_hook(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def twilio_hook(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Serve both routes on a free loopback port until the block ends."""
        app = web.Application()
        app.router.add_post("/webhooks/meta", self.meta_hook)
        app.router.add_post("/webhooks/twilio", self.twilio_hook)
        async with serving(app) as self.base:
            yield

    def sim_settings(self, **knobs: Any) -> SimSettings:
        """``quick_settings`` of a simulator calling this receiver back (Twilio: at each send's StatusCallback)."""
        url = f"{self.base}/webhooks/meta"
        return quick_settings(**{**self._sim, "messenger_webhook_url": url, "instagram_webhook_url": url, **knobs})


class Hook:
    """Receives status callbacks; keeps every status with its phone_number_id, in arrival order."""

    def __init__(self) -> None:
        self.statuses: list[dict[str, Any]] = []
        self.requests: list[int] = []  # statuses per accepted request
        self.raw: list[tuple[bytes, str]] = []  # (body, X-Hub-Signature-256) of every accepted request
        self.bad_signatures = 0
        self.answers: list[int] = []  # answers to give before 200 (a webhook that fails a few times)
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        if not meta_signed(request, raw, APP_SECRET):
            self.bad_signatures += 1
            return web.Response(status=401)
        if self.answers:
            return web.Response(status=self.answers.pop(0))
        self.raw.append((raw, request.headers["X-Hub-Signature-256"]))
        body = orjson.loads(raw)
        assert body["object"] == "whatsapp_business_account"
        count = 0
        for entry in body["entry"]:
            for change in entry["changes"]:
                assert change["field"] == "messages"
                value = change["value"]
                for status in value["statuses"]:
                    self.statuses.append({**status, "phone_number_id": value["metadata"]["phone_number_id"]})
                    count += 1
        self.requests.append(count)
        return web.Response(text="ok")

    def of_status(self, status: str) -> int:
        """How many statuses ``status`` arrived."""
        return sum(1 for s in self.statuses if s["status"] == status)

    def of(self, wamid: str) -> list[str]:
        """The statuses received for one message, in arrival order."""
        return [s["status"] for s in self.statuses if s["id"] == wamid]


def message(to: str, room: str | None = None, message_id: str | None = None) -> dict[str, Any]:
    """A Cloud API text message body, carrying inturn's callback data when room and message are given."""
    body: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": to,
        "type": "text",
        "text": {"body": "hello"},
    }
    if room is not None and message_id is not None:
        body["biz_opaque_callback_data"] = encode_callback_data(room, message_id)
    return body


async def send(client: aiohttp.ClientSession, sim: RunningSim, body: Any, **kw: Any) -> tuple[int, Any, Any]:
    """POST a send; returns (status, JSON answer, headers)."""
    kw.setdefault("headers", AUTH)
    number = kw.pop("phone_number_id", "100200300")
    async with client.post(sim.send_url(number), json=body, **kw) as answer:
        return answer.status, await answer.json(), answer.headers


async def control(client: aiohttp.ClientSession, sim: RunningSim, path: str, body: Any = None) -> Any:
    """Call the control API (GET without a body, POST with one); fails on a non-200 answer."""
    url = f"{sim.url}/_sim/{path}"
    request = client.get(url) if body is None else client.post(url, json=body)
    async with request as answer:
        assert answer.status == 200, await answer.text()
        return await answer.json()
