"""The bridge process: Kafka producer, relay, pull or push, and the HTTP server with the probes.

Lifecycle: ``start`` (topics checked, producer up, pulling or serving push), then ``stop`` on
SIGTERM/SIGINT: stop taking messages, wait up to ``bridge_shutdown_timeout_s`` for outstanding
Kafka confirmations (each acks or nacks its Pub/Sub message), close the stream, the HTTP server
and the producer. ``/healthz`` is 200 while the process can work (503 once the stream failed);
``/readyz`` is 200 while it takes messages.
"""

from __future__ import annotations

import asyncio
import signal

import structlog
from aiohttp import web

from inturn import logs, probes, topics
from inturn.errors import TopicMissingError
from inturn.kafka import make_admin
from inturn.sdk import MessageProducer
from inturn.settings.bridge import BridgeSettings
from inturn_bridge.oidc import PushAuth
from inturn_bridge.pull import PullBridge
from inturn_bridge.push import MAX_ENVELOPE_BYTES, PushEndpoint
from inturn_bridge.relay import Relay

log = structlog.get_logger("inturn.bridge")


class BridgeService:
    """One bridge process (pull or push, per ``settings.bridge_mode``)."""

    def __init__(self, settings: BridgeSettings) -> None:
        self.settings = settings
        self._draining = asyncio.Event()
        self._stopped = asyncio.Event()
        self._producer: MessageProducer | None = None
        self._relay: Relay | None = None
        self._puller: PullBridge | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def port(self) -> int:
        """The HTTP server's port (useful when configured as 0)."""
        return self._port

    @property
    def relay(self) -> Relay:
        """The relay (after ``start``)."""
        if self._relay is None:
            raise RuntimeError("the bridge is not started")
        return self._relay

    async def start(self) -> None:
        """Check the topics, connect, start pulling or serving; raises ``TopicMissingError``, ``ConfigError``."""
        settings = self.settings
        await asyncio.to_thread(_check_topics, settings)
        self._producer = MessageProducer(settings, **{"message.timeout.ms": settings.bridge_kafka_delivery_timeout_ms})
        self._relay = Relay(settings, self._producer)
        app = web.Application(client_max_size=MAX_ENVELOPE_BYTES)
        probes.add_probes(app, alive=self._alive, ready=self._ready)
        if settings.bridge_mode == "push":
            auth = PushAuth(settings) if settings.bridge_oidc_audience else None
            app.router.add_post(settings.bridge_push_path, PushEndpoint(self._relay, auth, self._draining).handle)
        else:
            self._puller = PullBridge(settings, self._relay)
            await asyncio.to_thread(self._puller.start)
            loop = asyncio.get_running_loop()
            self._puller.add_done_callback(lambda _: loop.call_soon_threadsafe(self._stream_ended))
        self._runner, self._port = await probes.serve(app, settings.bridge_http_host, settings.bridge_http_port)
        log.info("bridge.started", mode=settings.bridge_mode, port=self._port, topic=settings.topic_messages)

    def _stream_ended(self) -> None:
        if self._puller is not None and (error := self._puller.failure()) is not None:
            log.error("bridge.stream_failed", error=str(error))
            self._stopped.set()

    @property
    def failed(self) -> BaseException | None:
        """Why the pull stream ended on its own, if it did."""
        return self._puller.failure() if self._puller is not None else None

    async def wait(self) -> None:
        """Return when ``request_stop`` was called or the stream failed."""
        await self._stopped.wait()

    def request_stop(self) -> None:
        """Ask ``wait`` to return (signal handlers call this)."""
        self._stopped.set()

    async def stop(self) -> bool:
        """Drain and close everything; returns whether every outstanding write settled in time."""
        timeout = self.settings.bridge_shutdown_timeout_s
        self._draining.set()
        settled = True
        if self._puller is not None:
            settled = await asyncio.to_thread(self._puller.stop, timeout)
        elif self._relay is not None:
            settled = await asyncio.to_thread(self._relay.wait_idle, timeout)
        if self._runner is not None:
            await self._runner.cleanup()
        if self._producer is not None:
            left = await asyncio.to_thread(self._producer.close, 5.0)
            if left:
                log.warning("bridge.producer_left_records", left=left)
        return settled

    def _alive(self) -> tuple[bool, dict[str, object]]:
        failure = self.failed
        return (True, {}) if failure is None else (False, {"error": str(failure)})

    def _ready(self) -> tuple[bool, dict[str, object]]:
        draining = self._draining.is_set()
        return not draining and (self._puller is None or self._puller.running), {"draining": draining}


def _check_topics(settings: BridgeSettings) -> None:
    layout = topics.describe(make_admin(settings), settings)
    missing = [
        name
        for name, count in ((settings.topic_messages, layout.messages), (settings.topic_dlq, layout.dlq))
        if count is None
    ]
    if missing:
        raise TopicMissingError(f"missing topics: {', '.join(missing)}; create them with `inturn topics create`")


async def serve(settings: BridgeSettings) -> int:
    """Run the bridge until SIGTERM/SIGINT (0) or until the pull stream fails (1)."""
    service = BridgeService(settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, service.request_stop)
    try:
        await service.start()
        await service.wait()
    finally:
        await service.stop()  # also after a failed start: closes whatever was opened
    return 1 if service.failed is not None else 0


def run(settings: BridgeSettings) -> int:
    """The ``inturn bridge`` entry point: logs configured, then ``serve``."""
    logs.configure(settings.log_format, settings.log_level)
    return asyncio.run(serve(settings))
