"""The internal port (probes, metrics, the OpenAPI document) served from a thread of its own, with its own event
loop, so that a flood on the public port does not queue the probes behind it.

On one event loop, ``/healthz`` waited its turn behind every connection of a flood: under 3,400 hostile
connections (docs/security.md, "Measured") it took up to 169 ms on a quiet machine and seconds on a busy one, and
a liveness probe that times out restarts a pod that is doing its job. ``InternalServer`` runs a second uvicorn
server in a daemon thread, on a listening socket bound before it starts, serving the same application: the
requests it takes are the internal port's (``WebhookApp`` tells the ports apart by ``scope["server"]``), and
``GuardedProtocol`` refuses any body there, as before.

What the internal thread reads of the serving loop is plain values that one thread writes and the other reads
(a float assignment is atomic under the GIL): Kafka's last sign of life (``_Runtime``) and ``LoopBeat``, the
serving loop's heartbeat. So the probes stay truthful without calling into the serving loop: ``/healthz`` fails
when the serving loop has not run for ``LOOP_STALLED_S`` (a wedged loop is what a restart cures), ``/readyz`` when
Kafka was not heard from, or the loop has not run, within the readiness window. ``/metrics`` reads
prometheus_client's registry, which is thread-safe.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
import time
from typing import Any

import structlog
import uvicorn
from starlette.types import Receive, Scope, Send

from inturn_webhook.guard import Budget, Guard, GuardedProtocol, HeapKeeper

log = structlog.get_logger("inturn.webhook")

#: How often the serving loop records that it runs.
BEAT_EVERY_S = 0.5
#: ``/healthz`` fails when the serving loop has not run for this long: no flood measured delays it by more than
#: a few seconds (docs/security.md), a wedged loop never recovers.
LOOP_STALLED_S = 30.0
#: How long the internal server may take to finish its requests when the process stops.
SHUTDOWN_S = 5


class LoopBeat:
    """The serving loop's heartbeat: ``run`` (a task on that loop) records the time every ``BEAT_EVERY_S``; any
    thread reads ``age``."""

    def __init__(self) -> None:
        self.at: float | None = None  # monotonic; None until ``run`` started (no lifespan: nothing to judge)

    def age(self) -> float:
        """Seconds since the serving loop last ran the heartbeat (0 before it started)."""
        at = self.at
        return 0.0 if at is None else time.monotonic() - at

    async def run(self) -> None:
        while True:
            self.at = time.monotonic()
            await asyncio.sleep(BEAT_EVERY_S)


class _InternalApp:
    """The application as the internal server calls it, with a ``Guard`` of its own: the same limits, a budget
    of nothing (no body is read there) and a heap keeper of this thread's loop."""

    def __init__(self, app: Any, guard: Guard) -> None:
        self.app = app
        self.guard = dataclasses.replace(guard, budget=Budget(0), heap=HeapKeeper())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def bind(host: str, port: int, *, shared: bool) -> socket.socket:
    """A listening socket on ``host:port``; ``shared``: several processes listen on it (``SO_REUSEPORT``: each
    of ``webhook_workers`` serves its own internal port, the kernel spreads the connections)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # connections wait in the backlog until the thread's loop accepts them
    except OSError:
        sock.close()
        raise
    return sock


class InternalServer:
    """uvicorn serving ``app`` on ``host:port`` from a daemon thread with its own event loop (uvloop)."""

    def __init__(self, app: Any, guard: Guard, host: str, port: int, *, shared: bool, keepalive_s: int) -> None:
        self.host, self.port, self.shared = host, port, shared
        config = uvicorn.Config(
            _InternalApp(app, guard),
            loop="uvloop",
            http=GuardedProtocol,
            ws="none",
            lifespan="off",  # the serving loop runs the application's lifespan
            log_config=None,
            access_log=False,
            proxy_headers=False,
            timeout_keep_alive=keepalive_s,
            timeout_graceful_shutdown=SHUTDOWN_S,
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind the port (``OSError`` when it is taken: the process does not start) and serve it from a thread."""
        sock = bind(self.host, self.port, shared=self.shared)
        self._thread = threading.Thread(target=self._serve, args=(sock,), name="inturn-webhook-internal", daemon=True)
        self._thread.start()
        log.info("internal_port_serving", port=self.port, thread=self._thread.name)

    def _serve(self, sock: socket.socket) -> None:
        try:
            self.server.run(sockets=[sock])
        finally:
            sock.close()

    def stop(self) -> None:
        """Finish the internal port's requests (at most ``SHUTDOWN_S``) and end the thread."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(SHUTDOWN_S + 2.0)
            self._thread = None
