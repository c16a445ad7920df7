"""``/metrics``, ``/healthz`` (the process and its loop are alive), ``/readyz`` (taking work) and
``/rooms/{room_id}`` (what this worker holds in memory for a room, for ``inturn rooms show``).

Readiness goes false as soon as draining starts, and while PostgreSQL is unreachable (the worker
then sends nothing, so it should not count as ready).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from inturn.metrics import CONTENT_TYPE_LATEST, exposition


async def start_health_server(
    host: str,
    port: int,
    ready: Callable[[], tuple[bool, dict[str, object]]],
    room: Callable[[str], dict[str, object] | None],
) -> web.AppRunner:
    """Serve the probes, metrics and ``/rooms/{room_id}`` (what this worker holds for a room, 404 if nothing);
    returns the runner (``await runner.cleanup()`` to stop)."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def readyz(_: web.Request) -> web.Response:
        ok, detail = ready()
        return web.json_response({"ready": ok, **detail}, status=200 if ok else 503)

    async def room_view(request: web.Request) -> web.Response:
        view = room(request.match_info["room_id"])
        if view is None:
            return web.json_response({"error": "this worker holds nothing for that room"}, status=404)
        return web.json_response(view)

    app = web.Application()
    app.router.add_get("/rooms/{room_id}", room_view)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
