"""The bridge process: Kafka producer, relay, pull or push, and two HTTP servers.

The internal server (``bridge_internal_port``, both modes) serves ``/metrics``, ``/healthz`` and ``/readyz``;
the push server (``bridge_http_port``, push mode only) serves ``POST /push`` and nothing else, so an Ingress
routing the push port exposes only what Pub/Sub needs. What a push request must prove is decided by the
settings (``BridgeSettings.push_checks``) and said once at start: a warning when it is less than an OIDC token
of the audience and service account.

Lifecycle: ``start`` (topics checked, producer up, pulling or serving push), then ``stop`` on
SIGTERM/SIGINT: stop taking messages, wait up to ``bridge_shutdown_timeout_s`` for outstanding
Kafka confirmations (each acks or nacks its Pub/Sub message), close the stream, the HTTP servers
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
        self._runners: list[web.AppRunner] = []
        self._port = 0
        self._internal_port = 0

    @property
    def port(self) -> int:
        """The push endpoint's port (useful when configured as 0); 0 in pull mode, which has none."""
        return self._port

    @property
    def internal_port(self) -> int:
        """The port of ``/metrics``, ``/healthz`` and ``/readyz``."""
        return self._internal_port

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
        internal = web.Application()
        probes.add_probes(internal, alive=self._alive, ready=self._ready)
        runner, self._internal_port = await probes.serve(
            internal, settings.bridge_http_host, settings.bridge_internal_port
        )
        self._runners.append(runner)
        if settings.bridge_mode == "push":
            _say_what_push_checks(settings)
            auth = PushAuth(settings) if settings.push_checks() != "none" else None
            push = web.Application(client_max_size=MAX_ENVELOPE_BYTES)
            push.router.add_post(settings.bridge_push_path, PushEndpoint(self._relay, auth, self._draining).handle)
            runner, self._port = await probes.serve(push, settings.bridge_http_host, settings.bridge_http_port)
            self._runners.append(runner)
        else:
            self._puller = PullBridge(settings, self._relay)
            await asyncio.to_thread(self._puller.start)
            loop = asyncio.get_running_loop()
            self._puller.add_done_callback(lambda _: loop.call_soon_threadsafe(self._stream_ended))
        log.info(
            "bridge.started",
            mode=settings.bridge_mode,
            port=self._port or None,
            internal_port=self._internal_port,
            topic=settings.topic_messages,
        )

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
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
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


def _say_what_push_checks(settings: BridgeSettings) -> None:
    """Log, at start, a warning when push requests are taken on less than a token of the audience and account."""
    checks = settings.push_checks()
    if checks == "audience":
        log.warning(
            "bridge.push_any_service_account",
            audience=settings.bridge_oidc_audience,
            hint="set INTURN_BRIDGE_OIDC_EMAIL: a token of any service account minted for this audience passes",
        )
    elif checks == "none" and settings.bridge_push_allow_unauthenticated:
        log.warning(
            "bridge.push_unauthenticated",
            opt_out="INTURN_BRIDGE_PUSH_ALLOW_UNAUTHENTICATED",
            environment=settings.environment,
            hint="POST /push is taken from anyone who reaches the port: keep it on a private network",
        )
    elif checks == "none":
        log.warning(
            "bridge.push_unauthenticated",
            opt_out=None,
            environment=settings.environment,
            hint="POST /push is taken from anyone who reaches the port; production refuses this without "
            "INTURN_BRIDGE_OIDC_AUDIENCE and INTURN_BRIDGE_OIDC_EMAIL",
        )


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
