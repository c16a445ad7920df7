"""Running the simulator: in-process on the current event loop (tests), or as a process (``inturn sim``)."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog
from aiohttp import web

from inturn.settings.sim import SimSettings
from inturn_sim.app import SIM, create_app
from inturn_sim.simulator import Simulator

log = structlog.get_logger("inturn_sim")


@dataclass(frozen=True)
class RunningSim:
    """A simulator serving on 127.0.0.1: its base URL, port and in-process state."""

    url: str
    port: int
    app: web.Application

    @property
    def sim(self) -> Simulator:
        """The simulator behind the HTTP face (counters, receipts, knobs)."""
        return self.app[SIM]

    def send_url(self, phone_number_id: str = "100200300", version: str = "v21.0") -> str:
        """The Cloud API send URL for ``phone_number_id``."""
        return f"{self.url}/{version}/{phone_number_id}/messages"


@asynccontextmanager
async def running_sim(settings: SimSettings) -> AsyncIterator[RunningSim]:
    """Serve the simulator on the current loop, on 127.0.0.1 and a free port, until the block ends."""
    app = create_app(settings)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    try:
        await web.SockSite(runner, sock).start()
        yield RunningSim(url=f"http://127.0.0.1:{port}", port=port, app=app)
    finally:
        await runner.cleanup()
        sock.close()


async def serve(settings: SimSettings) -> None:
    """Serve on ``sim_host:sim_port`` until SIGTERM or SIGINT, then stop gracefully (receipts flushed)."""
    app = create_app(settings)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    # The kernel's limit (somaxconn), not aiohttp's 128: three workers open 200 connections each at once, and a
    # handshake dropped from a full accept queue leaves the sender's request to TCP retransmission, read by the
    # simulator seconds to minutes after the sender gave up on it or died (docs/reliability.md, problem 12).
    site = web.TCPSite(runner, settings.sim_host, settings.sim_port, backlog=socket.SOMAXCONN)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    log.info(
        "sim_listening",
        host=settings.sim_host,
        port=settings.sim_port,
        webhook_url=settings.sim_webhook_url or None,
        receipts_path=settings.sim_receipts_path,
    )
    try:
        await stop.wait()
        log.info("sim_stopping")
    finally:
        await runner.cleanup()
        stats = app[SIM].stats
        log.info("sim_stopped", accepted=stats.accepted, deliveries=stats.deliveries, callbacks=stats.callbacks_sent)


def main(settings: SimSettings) -> int:
    """Run ``serve`` on uvloop when it is installed; returns the exit code."""
    try:
        import uvloop
    except ImportError:  # uvloop is optional (not on Windows)
        asyncio.run(serve(settings))
    else:
        uvloop.run(serve(settings))
    return 0
