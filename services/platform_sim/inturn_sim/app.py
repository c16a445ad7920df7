"""The simulator's HTTP face: the Cloud API send call, the ``/_sim/`` control API, probes and metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inturn.metrics import exposition
from inturn.metrics.sim import registry_for
from inturn.probes import add_probes
from inturn.settings.sim import SimSettings
from inturn_sim import meta
from inturn_sim.knobs import ConfigUpdate
from inturn_sim.platform_routes import add_platform_routes
from inturn_sim.simulator import Fault, Simulator

SIM = web.AppKey("sim", Simulator)
REGISTRY = web.AppKey("sim_registry", CollectorRegistry)


class FaultRequest(BaseModel):
    """Body of ``POST /_sim/faults``: the next ``count`` sends (to ``recipient`` from ``account``, or any) get
    ``status``; with ``for_s``, every matching send during the next ``for_s`` seconds does (``count`` unused)."""

    model_config = ConfigDict(extra="forbid")

    recipient: str | None = None
    account: str | None = Field(
        None, description="Only sends of this account (phone_number_id, page, IG account, Account SID, 'bot')."
    )
    status: Literal[400, 401, 429, 500, 503]
    count: int = Field(1, ge=1)
    for_s: float | None = Field(None, gt=0, le=3600, description="A storm: every matching send for this long.")
    retry_after: float | None = Field(None, ge=0, description="Retry-After of a 429 (seconds; default 1).")


class ReleaseRequest(BaseModel):
    """Body of ``POST /_sim/release``: whose held statuses to send (every withheld recipient when omitted)."""

    model_config = ConfigDict(extra="forbid")

    recipients: list[str] | None = None


def create_app(settings: SimSettings) -> web.Application:
    """The simulator as an aiohttp application; its callback sender runs while the app does."""
    app = web.Application()
    sim = Simulator(settings)
    app[SIM] = sim
    registry = app[REGISTRY] = registry_for(sim.stats.snapshot)
    app.cleanup_ctx.append(_lifecycle)
    app.router.add_post("/{version}/{phone_number_id}/messages", send_message)
    app.router.add_post("/_via/{via}/{version}/{phone_number_id}/messages", send_message)
    add_platform_routes(app, SIM)
    app.router.add_get("/_sim/health", health)
    app.router.add_get("/_sim/receipts", receipts)
    app.router.add_get("/_sim/stats", stats)
    app.router.add_get("/_sim/config", config)
    app.router.add_post("/_sim/config", config)
    app.router.add_post("/_sim/faults", faults)
    app.router.add_post("/_sim/release", release)
    app.router.add_post("/_sim/reset", reset)
    add_probes(app, ready=lambda: (sim.sender.started and not sim.closing, {}), metrics=lambda: exposition(registry))
    return app


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    sim = app[SIM]
    await sim.start()
    yield
    await sim.close()


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(data), content_type="application/json")


def _meta_error(sim: Simulator, status: int, details: str | None = None) -> web.Response:
    sim.stats.reject(status)
    return web.Response(status=status, body=meta.error_body(status, details), content_type="application/json")


async def send_message(request: web.Request) -> web.Response:
    """``POST /{version}/{phone_number_id}/messages``: WhatsApp Cloud API's send call (also under ``/_via/{name}``,
    which names the sender in its receipts: fault tests give each worker its own)."""
    sim = request.app[SIM]
    if not sim.authorized(request.headers.get("Authorization")):
        return _meta_error(sim, 401)
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        return _meta_error(sim, 400, "The request body is not valid JSON.")
    answer = sim.answer_send(request.match_info["phone_number_id"], body, request.match_info.get("via"))
    if answer.delay_s:
        await asyncio.sleep(answer.delay_s)  # the modelled slow answer itself, not a wait for a condition
    return web.Response(status=answer.status, body=answer.body, headers=answer.headers, content_type="application/json")


async def health(request: web.Request) -> web.Response:
    """``/_sim/health``: the process answers (``/healthz`` and ``/readyz`` are ``inturn.probes``')."""
    return _json({"status": "ok"})


async def receipts(request: web.Request) -> web.Response:
    """``GET /_sim/receipts[?since=SEQ]``: device deliveries in device order (after ``since`` when given)."""
    sim = request.app[SIM]
    try:
        since = int(request.query.get("since", "0"))
    except ValueError:
        return _json({"error": "since must be an integer"}, status=400)
    return _json({"receipts": sim.receipts.since(since), "duplicates": sim.receipts.duplicates})


async def stats(request: web.Request) -> web.Response:
    """``GET /_sim/stats``: the counters."""
    return _json(request.app[SIM].stats.snapshot())


async def config(request: web.Request) -> web.Response:
    """``GET /_sim/config``: the knobs; ``POST``: change some of them (unknown names or bad values: 400)."""
    sim = request.app[SIM]
    if request.method == "GET":
        return _json(sim.knob_values())
    try:
        update = ConfigUpdate.model_validate_json(await request.read())
        return _json(sim.configure(update))
    except (ValidationError, ValueError) as exc:
        return _json({"error": str(exc)}, status=400)


async def faults(request: web.Request) -> web.Response:
    """``POST /_sim/faults``: queue one-shot answers for the next matching sends."""
    sim = request.app[SIM]
    try:
        ask = FaultRequest.model_validate_json(await request.read())
    except ValidationError as exc:
        return _json({"error": str(exc)}, status=400)
    until = time.monotonic() + ask.for_s if ask.for_s is not None else None
    sim.add_fault(Fault(ask.status, ask.count, ask.recipient, ask.retry_after, ask.account, until))
    return _json({"queued": ask.count, "for_s": ask.for_s, "faults": len(sim.faults)})


async def release(request: web.Request) -> web.Response:
    """``POST /_sim/release``: stop withholding recipients and send what was held for them."""
    sim = request.app[SIM]
    raw = await request.read()
    try:
        ask = ReleaseRequest.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        return _json({"error": str(exc)}, status=400)
    return _json({"released": sim.release(ask.recipients)})


async def reset(request: web.Request) -> web.Response:
    """``POST /_sim/reset``: clear receipts, counters, faults and everything pending."""
    request.app[SIM].reset()
    return _json({"status": "reset"})
