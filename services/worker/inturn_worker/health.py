"""The worker's HTTP face, on its internal port: the probes and metrics every inturn process serves
(``inturn.probes``) and ``/rooms/{room_id}`` (what this worker holds in memory for a room, for
``inturn rooms show``).

The room API shows room ids and message ids, so it answers only a caller presenting
``Authorization: Bearer <INTURN_WORKER_ROOM_API_TOKEN>`` (compared in constant time; 401 otherwise);
with no token configured the route does not exist (404).

Readiness goes false as soon as draining starts, and while PostgreSQL is unreachable (the worker
then sends nothing, so it should not count as ready).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Mapping

from aiohttp import web
from pydantic import SecretStr

from inturn import probes
from inturn_worker.partition import Partition


def describe(parts: Mapping[int, Partition], room_id: str) -> dict[str, object] | None:
    """What this worker holds for a room (None when nothing): buffered messages, the head, in flight."""
    room = next((r for part in parts.values() if (r := part.rooms.get(room_id)) is not None), None)
    if room is None:
        return None
    head = room.queue.head
    return {
        "room_id": room_id,
        "buffered": len(room.queue),
        "head_message_id": head.message_id if head else None,
        "head_offset": head.offset if head else None,
        "partition": head.part.partition if head else None,
        "in_flight": room.in_flight,
        "blocked": room.blocked,
        "head_waiting_s": round(time.monotonic() - room.head_since, 3),
    }


async def start_health_server(
    host: str,
    port: int,
    ready: probes.Check,
    room: Callable[[str], dict[str, object] | None],
    room_api_token: SecretStr | None = None,
) -> tuple[web.AppRunner, int]:
    """Serve the probes, metrics and, when ``room_api_token`` is set, ``/rooms/{room_id}`` to callers bearing it
    (401 otherwise; 404 when this worker holds nothing for the room); returns the runner
    (``await runner.cleanup()`` to stop) and the port it listens on."""
    expected = f"Bearer {room_api_token.get_secret_value()}".encode() if room_api_token is not None else None

    async def room_view(request: web.Request) -> web.Response:
        presented = request.headers.get("Authorization", "").encode()
        if expected is None or not hmac.compare_digest(presented, expected):
            return web.json_response(
                {"error": "the room API needs Authorization: Bearer <INTURN_WORKER_ROOM_API_TOKEN>"},
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="inturn-worker"'},
            )
        view = room(request.match_info["room_id"])
        if view is None:
            return web.json_response({"error": "this worker holds nothing for that room"}, status=404)
        return web.json_response(view)

    app = web.Application()
    probes.add_probes(app, ready=ready)
    if expected is not None:  # no token, no room API
        app.router.add_get("/rooms/{room_id}", room_view)
    return await probes.serve(app, host, port)
