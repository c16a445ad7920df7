"""The probes and metrics every inturn process serves: ``/healthz``, ``/readyz``, ``/metrics``.

One shape everywhere, so the chart's probes and an operator's ``curl`` read every service alike:

- ``/healthz`` (liveness): 200 ``{"status": "ok"}`` while the process can still do its work, else 503
  ``{"status": "failed", ...}`` with what is wrong (a restart is what helps);
- ``/readyz`` (readiness): 200 ``{"ready": true, ...}`` while it takes work, else 503 ``{"ready": false, ...}``
  (draining, a dependency away): the details say why;
- ``/metrics``: the Prometheus text exposition.

``add_probes`` puts them on an aiohttp application (worker, bridge, platform simulator); the webhook, a FastAPI
application, answers with ``health_answer`` and ``ready_answer`` so its bodies and statuses are the same.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson
from aiohttp import web

from inturn.metrics import CONTENT_TYPE_LATEST, exposition

#: A check: whether it passes, and details to show either way.
Check = Callable[[], tuple[bool, dict[str, object]]]


def _always() -> tuple[bool, dict[str, object]]:
    return True, {}


def health_answer(ok: bool, detail: dict[str, object]) -> tuple[int, bytes]:
    """Status and JSON body of ``/healthz``."""
    return (
        (200, orjson.dumps({"status": "ok", **detail})) if ok else (503, orjson.dumps({"status": "failed", **detail}))
    )


def ready_answer(ok: bool, detail: dict[str, object]) -> tuple[int, bytes]:
    """Status and JSON body of ``/readyz``."""
    return (200 if ok else 503), orjson.dumps({"ready": ok, **detail})


def add_probes(
    app: web.Application,
    *,
    ready: Check,
    alive: Check = _always,
    metrics: Callable[[], bytes] = exposition,
) -> None:
    """Serve ``/healthz`` from ``alive``, ``/readyz`` from ``ready`` and ``/metrics`` from ``metrics`` on ``app``."""

    def answer(status_and_body: tuple[int, bytes]) -> web.Response:
        status, body = status_and_body
        return web.Response(status=status, body=body, content_type="application/json")

    async def healthz(_: web.Request) -> web.Response:
        return answer(health_answer(*alive()))

    async def readyz(_: web.Request) -> web.Response:
        return answer(ready_answer(*ready()))

    async def metrics_view(_: web.Request) -> web.Response:
        return web.Response(body=metrics(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_view)


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving ``app`` on ``host:port`` (0: any free port); the runner (``cleanup()`` stops it) and the port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner, int(runner.addresses[0][1])
