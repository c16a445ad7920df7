"""The worker's HTTP face: the probes and metrics every inturn process serves (``inturn.probes``) and
``/rooms/{room_id}`` (what this worker holds in memory for a room, for ``inturn rooms show``).

Readiness goes false as soon as draining starts, and while PostgreSQL is unreachable (the worker
then sends nothing, so it should not count as ready).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from inturn import probes


async def start_health_server(
    host: str,
    port: int,
    ready: probes.Check,
    room: Callable[[str], dict[str, object] | None],
) -> tuple[web.AppRunner, int]:
    """Serve the probes, metrics and ``/rooms/{room_id}`` (404 when this worker holds nothing for the room);
    returns the runner (``await runner.cleanup()`` to stop) and the port it listens on."""

    async def room_view(request: web.Request) -> web.Response:
        view = room(request.match_info["room_id"])
        if view is None:
            return web.json_response({"error": "this worker holds nothing for that room"}, status=404)
        return web.json_response(view)

    app = web.Application()
    probes.add_probes(app, ready=ready)
    app.router.add_get("/rooms/{room_id}", room_view)
    return await probes.serve(app, host, port)
