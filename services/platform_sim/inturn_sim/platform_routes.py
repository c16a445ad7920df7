"""The send routes of Messenger, Instagram, Twilio and Telegram, each under its own prefix (their real hosts
differ; here one server answers all): point ``INTURN_<PLATFORM>_BASE_URL`` at ``{sim}/messenger``,
``{sim}/instagram``, ``{sim}/twilio`` and ``{sim}/telegram``.

Every route checks its credentials, then the body, then (``Simulator.gate``) queued faults, the rate limit per
account and the 5xx rate, and answers in its platform's shape (``platforms.py``)."""

from __future__ import annotations

import base64
import binascii
import hmac
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlsplit

import orjson
from aiohttp import web

from inturn.platforms.base import CALLBACK_HEADER
from inturn.platforms.twilio import CALLBACK_PARAM
from inturn_sim import platforms
from inturn_sim.simulator import Simulator


def add_platform_routes(app: web.Application, sim_key: web.AppKey[Simulator]) -> None:
    """Register the four send routes."""

    def handler(send: Any) -> Any:
        async def handle(request: web.Request) -> web.Response:
            response: web.Response = await send(request, request.app[sim_key])
            return response

        return handle

    app.router.add_post("/messenger/{version}/{account}/messages", handler(_messenger))
    app.router.add_post("/instagram/{version}/{account}/messages", handler(_instagram))
    app.router.add_post("/twilio/2010-04-01/Accounts/{account}/Messages.json", handler(_twilio))
    app.router.add_post("/telegram/bot{token}/sendMessage", handler(_telegram))


def _json(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=body, headers=headers, content_type="application/json")


def _retry_after(after: float | None) -> dict[str, str] | None:
    return {"Retry-After": f"{after:g}"} if after is not None else None


async def _send_api(request: web.Request, sim: Simulator, platform: str) -> web.Response:
    """Messenger's and Instagram's Send API (``me`` as the account names the configured one: any here)."""
    if not sim.authorized(request.headers.get("Authorization")):
        sim.stats.reject(401)
        return _json(platforms.graph_error(401), 401)
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        body = None
    problem = platforms.send_api_problem(body)
    if problem is not None:
        sim.stats.reject(400)
        return _json(platforms.graph_error(400, problem), 400)
    account, to = request.match_info["account"], body["recipient"]["id"]
    refused = sim.gate(account, to)
    if refused is not None:
        status, after = refused
        return _json(
            platforms.graph_error(status, "Injected or limited by the simulator."), status, _retry_after(after)
        )
    sent = sim.accept(platform, account, to, request.headers.get(CALLBACK_HEADER))
    return _json(platforms.send_api_answer(to, sent.wamid))


async def _messenger(request: web.Request, sim: Simulator) -> web.Response:
    return await _send_api(request, sim, "messenger")


async def _instagram(request: web.Request, sim: Simulator) -> web.Response:
    return await _send_api(request, sim, "instagram")


def _basic_password(header: str | None) -> tuple[str, str] | None:
    if header is None or not header.startswith("Basic "):
        return None
    try:
        user, sep, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep and user else None


async def _twilio(request: web.Request, sim: Simulator) -> web.Response:
    """``POST /2010-04-01/Accounts/{AccountSid}/Messages.json``: Basic auth, form body, 201 with the resource."""
    credentials = _basic_password(request.headers.get("Authorization"))
    token = sim.settings.sim_twilio_auth_token.get_secret_value().encode()
    if credentials is None or not hmac.compare_digest(credentials[1].encode(), token):
        sim.stats.reject(401)
        return _json(platforms.twilio_error(401), 401)
    try:
        form = dict(parse_qsl((await request.read()).decode(), keep_blank_values=True))
    except (UnicodeDecodeError, ValueError):
        form = {}
    problem = platforms.twilio_problem(form)
    if problem is not None:
        sim.stats.reject(400)
        return _json(platforms.twilio_error(400, problem), 400)
    account, to = request.match_info["account"], form["To"]
    refused = sim.gate(account, to)
    if refused is not None:
        status, after = refused
        return _json(platforms.twilio_error(status), status, _retry_after(after))
    callback = form.get("StatusCallback")
    data = parse_qs(urlsplit(callback).query).get(CALLBACK_PARAM, [None])[0] if callback else None
    sent = sim.accept(
        "twilio",
        account,
        to,
        data,
        callback_url=callback,
        queued_callback=bool(form.get("MessagingServiceSid")),
        sender=form.get("From") or form.get("MessagingServiceSid"),
    )
    return _json(platforms.twilio_answer(sent.wamid, account, form, formatdate(usegmt=True)), 201)


async def _telegram(request: web.Request, sim: Simulator) -> web.Response:
    """``POST /bot{token}/sendMessage``: JSON or form ``chat_id`` and ``text``; the answer is the ack."""
    expected = sim.settings.sim_access_token.get_secret_value().encode()
    if not hmac.compare_digest(request.match_info["token"].encode(), expected):
        sim.stats.reject(401)
        return _json(platforms.telegram_error(401), 401)
    raw = await request.read()
    try:
        if request.content_type == "application/json":
            body = orjson.loads(raw)
        else:
            body = dict(parse_qsl(raw.decode(), keep_blank_values=True))
    except (orjson.JSONDecodeError, UnicodeDecodeError, ValueError):
        body = None
    chat = body.get("chat_id") if isinstance(body, dict) else None
    text = body.get("text") if isinstance(body, dict) else None
    if isinstance(chat, bool) or not isinstance(chat, int | str) or chat == "":
        sim.stats.reject(400)
        return _json(platforms.telegram_error(400, description="Bad Request: chat_id is empty"), 400)
    if not isinstance(text, str) or not text:
        sim.stats.reject(400)
        return _json(platforms.telegram_error(400), 400)
    to = str(chat)
    refused = sim.gate("bot", to)
    if refused is not None:
        status, after = refused
        wait = round(after) if after is not None else None
        return _json(platforms.telegram_error(status, retry_after=wait), status, _retry_after(after))
    sent = sim.accept("telegram", "bot", to, request.headers.get(CALLBACK_HEADER))
    return _json(platforms.telegram_answer(chat, int(sent.wamid), text, sent.accepted_at_ms // 1000))
