"""The webhook's application: platform status callbacks in, acks on Kafka out.

``WebhookApp`` is a FastAPI application that serves the two callback POSTs itself, as plain ASGI
(``inturn_webhook.callbacks``: signature, body limit, parsing, produce, answer once Kafka confirmed),
and leaves everything else to FastAPI: the verification handshake, the probes, ``/metrics`` and the
OpenAPI document, which describes the callback endpoints too. The probes, metrics and document are served only on
the internal port (``INTURN_WEBHOOK_INTERNAL_PORT``), the callbacks and the handshake only on the public one. The
``lifespan`` owns the Kafka producer and a probe that keeps ``/readyz`` honest.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import time
from collections.abc import AsyncIterator
from typing import Any

import structlog
from confluent_kafka import KafkaException
from fastapi import FastAPI, Query, Request, Response
from fastapi.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

from inturn import __version__, dead_letters, probes
from inturn.kafka import AsyncProducer, make_admin, make_producer
from inturn.metrics import CONTENT_TYPE_LATEST, exposition
from inturn.metrics import webhook as metrics
from inturn.runtime import tune_gc
from inturn.schemas import now_ms
from inturn.settings import load
from inturn.settings.webhook import WebhookSettings
from inturn_webhook import openapi
from inturn_webhook.admission import admission
from inturn_webhook.callbacks import Answer, CallbackEndpoint, TwilioEndpoint
from inturn_webhook.guard import Budget, Guard, HeapKeeper, release_memory_after_bodies
from inturn_webhook.intake import AckIntake
from inturn_webhook.internal import LOOP_STALLED_S, InternalServer, LoopBeat
from inturn_webhook.platforms import parse_messenger, parse_twilio
from inturn_webhook.rooms import RoomResolver
from inturn_webhook.statuses import parse_generic, parse_meta

log = structlog.get_logger("inturn.webhook")

META_SIGNATURE = "x-hub-signature-256"
GENERIC_SIGNATURE = "x-inturn-signature-256"
WHATSAPP_PATH = "/webhooks/whatsapp"
GENERIC_PREFIX = "/webhooks/generic/"
#: The platforms with a callback endpoint of their own (the generic one takes any other), by path.
PLATFORM_PATHS = {
    WHATSAPP_PATH: "whatsapp",
    "/webhooks/messenger": "messenger",
    "/webhooks/instagram": "instagram",
    "/webhooks/twilio": "twilio",
}


#: What the internal port serves (INTURN_WEBHOOK_INTERNAL_PORT); the public port serves only the callbacks and
#: Meta's verification handshake.
INTERNAL_PATHS = frozenset(
    {"/metrics", "/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)
#: The GET routes of the public port: Meta's verification handshake.
HANDSHAKE_PATHS = frozenset({WHATSAPP_PATH, "/webhooks/messenger", "/webhooks/instagram"})
_NOT_FOUND = b'{"detail":"Not Found"}'
_NOT_FOUND_START = {
    "type": "http.response.start",
    "status": 404,
    "headers": ((b"content-length", b"%d" % len(_NOT_FOUND)), (b"content-type", b"application/json")),
}

HEALTHZ_PATH = "/healthz"
_HEALTHZ_STATUS, _HEALTHZ = probes.health_answer(True, {})
_HEALTHZ_HEADERS = ((b"content-length", b"%d" % len(_HEALTHZ)), (b"content-type", b"application/json"))


def _health(beat: LoopBeat) -> tuple[int, bytes]:
    """Liveness: 200 unless the serving loop has not run for ``LOOP_STALLED_S`` (a wedged loop: restart)."""
    stalled = beat.age()
    if stalled < LOOP_STALLED_S:
        return _HEALTHZ_STATUS, _HEALTHZ
    return probes.health_answer(False, {"event_loop_stalled_s": round(stalled, 1)})


class WebhookApp(FastAPI):
    """FastAPI, except that the callback POSTs and ``GET /healthz`` are answered here, before FastAPI's middleware
    and routing (``/healthz`` is then the cheapest answer the server gives: the benchmark's bare request).

    The port a request came to (``scope["server"]``) decides what it may reach: ``internal_port`` serves
    ``INTERNAL_PATHS`` (probes, metrics, the OpenAPI document), any other port only the callbacks and Meta's
    handshake; everything else is 404 there.

    A request reaches ``CallbackEndpoint.serve`` when FastAPI's own routes would have sent it to the
    callback handlers: POST to a path of ``PLATFORM_PATHS``, or to ``/webhooks/generic/{platform}`` with a
    ``platform`` of one path segment (Starlette's ``[^/]+``), paths read as Starlette reads them.
    """

    whatsapp: CallbackEndpoint
    generic: CallbackEndpoint
    endpoints: dict[str, CallbackEndpoint]  # by platform name: whatsapp, messenger, instagram, twilio
    internal_port: int
    guard: Guard  # what the server enforces before the application sees a request (inturn_webhook.guard)
    beat: LoopBeat  # the serving loop's heartbeat (the lifespan runs it), read by the probes
    #: The internal port's own server (thread and event loop), started and stopped by the lifespan; None: the
    #: internal port is served by whatever server calls the application (tests).
    internal_server: InternalServer | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection scope (request or lifespan)."""
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        method = scope["method"]
        server = scope.get("server")
        if server is not None and server[1] == self.internal_port:
            path = _route_path(scope)
            if method == "GET" and path == HEALTHZ_PATH:  # liveness: nothing to route, one value to read
                status, body = _health(self.beat)
                if body is _HEALTHZ:
                    await send({"type": "http.response.start", "status": status, "headers": _HEALTHZ_HEADERS})
                    await send({"type": "http.response.body", "body": body})
                else:
                    await _json(send, status, body)
                return
            if path in INTERNAL_PATHS:
                await super().__call__(scope, receive, send)
                return
            await _not_found(send)
            return
        if method == "POST":
            path = _route_path(scope)
            named = PLATFORM_PATHS.get(path)
            if named is not None:
                await self.endpoints[named].serve(scope, receive, send, named)
                return
            if path.startswith(GENERIC_PREFIX):
                platform = path[len(GENERIC_PREFIX) :]
                if platform and "/" not in platform:
                    await self.generic.serve(scope, receive, send, platform)
                    return
        elif method in ("GET", "HEAD") and _route_path(scope) in HANDSHAKE_PATHS:
            await super().__call__(scope, receive, send)
            return
        await _not_found(send)


async def _json(send: Send, status: int, body: bytes) -> None:
    headers = ((b"content-length", b"%d" % len(body)), (b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _not_found(send: Send) -> None:
    await send(_NOT_FOUND_START)
    await send({"type": "http.response.body", "body": _NOT_FOUND})


def _route_path(scope: Scope) -> str:
    """The path as Starlette's router matches it: without the ``root_path`` the app is mounted under, if any."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] == "/":
        return path[len(root) :]
    return path


def _answered(answer: Answer) -> Response:
    """A callback's answer as a Starlette response (FastAPI's route; the same bytes and headers)."""
    headers = {"Retry-After": "1"} if answer.retry else None
    return Response(answer.body, status_code=answer.status, media_type="application/json", headers=headers)


class _Runtime:
    """What the lifespan starts: the intake (with its producer) and Kafka's last sign of life."""

    intake: AckIntake | None = None
    kafka_ok_at: float = 0.0  # monotonic

    def __init__(self) -> None:
        self.beat = LoopBeat()

    def kafka_age(self) -> float | None:
        """Seconds since Kafka last answered a probe or confirmed a record (None: never)."""
        latest = max(self.kafka_ok_at, self.intake.last_confirmed if self.intake else 0.0)
        return time.monotonic() - latest if latest else None


async def _probe_kafka(producer: AsyncProducer, topic: str, runtime: _Runtime, interval: float, max_age: float) -> None:
    """Ask Kafka for the acks topic's metadata every ``interval`` seconds, recording success."""
    while True:
        try:
            metadata = await asyncio.to_thread(producer.producer.list_topics, topic, min(interval, 5.0))
        except KafkaException as exc:
            log.warning("kafka_unreachable", error=str(exc.args[0]))
        else:
            runtime.kafka_ok_at = time.monotonic()
            found = metadata.topics.get(topic)
            if runtime.intake is not None and found is not None and found.error is None and found.partitions:
                runtime.intake.acks_partitions = len(found.partitions)
        age = runtime.kafka_age()
        metrics.KAFKA_REACHABLE.set(1 if age is not None and age < max_age else 0)
        await asyncio.sleep(interval)


def create_app(settings: WebhookSettings | None = None) -> WebhookApp:
    """The webhook application; settings from the environment (``INTURN_WEBHOOK_*``) when not given."""
    cfg = settings or load(WebhookSettings)
    app_secrets = [s.get_secret_value().encode() for s in cfg.webhook_app_secrets]
    generic_secrets = [s.get_secret_value().encode() for s in cfg.webhook_generic_secret]
    verify_token = cfg.webhook_verify_token.get_secret_value().encode()
    rooms = RoomResolver(cfg.webhook_room_from_recipient)
    limit = cfg.webhook_max_body_bytes
    runtime = _Runtime()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        internal = app.internal_server
        if internal is not None:
            internal.start()  # the port taken: OSError, the process does not start
        producer = AsyncProducer(
            make_producer(
                cfg,
                **{
                    "linger.ms": cfg.webhook_kafka_linger_ms,
                    "message.timeout.ms": cfg.webhook_kafka_message_timeout_ms,
                },
            )
        )
        runtime.intake = AckIntake(producer, cfg)
        # Until the broker said what the dead-letter topic takes, Kafka's default limits hold.
        limit_asked = asyncio.create_task(_learn_dead_letter_limit(cfg, runtime.intake))
        probe = asyncio.create_task(
            _probe_kafka(producer, cfg.topic_acks, runtime, cfg.webhook_probe_interval_s, cfg.webhook_ready_max_age_s)
        )
        beat = asyncio.create_task(runtime.beat.run())
        log.info("webhook_started", acks_topic=cfg.topic_acks, dlq_topic=cfg.topic_dlq, secrets=len(app_secrets))
        # Real platform statuses carry no inturn callback data when the send did not attach it: say at start-up
        # what becomes of them, rather than only through a growing dead-letter count.
        room_log = log.info if rooms.fallback != "none" else log.warning
        room_log("room_lookup", **rooms.describe())
        try:
            yield
        finally:
            for task in (probe, limit_asked, beat):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            # Requests are all answered by now; what is still unconfirmed was answered 503 and will be retried.
            left = await producer.close(cfg.webhook_kafka_confirm_timeout_ms / 1000)
            runtime.intake.close()
            runtime.intake = None
            if internal is not None:  # the probes answer until the requests in flight are answered
                await asyncio.to_thread(internal.stop)
            log.info("webhook_stopped", undelivered=left)

    app = WebhookApp(
        title="inturn webhook",
        version=__version__,
        description="Turns messaging platforms' status callbacks into acks on Kafka (key = room_id).",
        lifespan=lifespan,
        # inturn's metrics are Prometheus (/metrics): without this FastAPI looks up OpenTelemetry providers on
        # every request, a cost the size of a status's own parsing.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )

    app.internal_port = cfg.webhook_internal_port
    app.beat = runtime.beat
    app.guard = Guard(
        max_header_bytes=cfg.webhook_max_header_bytes,
        max_headers=cfg.webhook_max_headers,
        header_timeout=cfg.webhook_header_timeout_s,
        body_timeout=cfg.webhook_body_timeout_s,
        internal_port=cfg.webhook_internal_port,
        admit=admission(
            {
                path.encode(): (b"x-twilio-signature" if named == "twilio" else META_SIGNATURE.encode())
                for path, named in PLATFORM_PATHS.items()
            },
            GENERIC_PREFIX.encode(),
            GENERIC_SIGNATURE.encode(),
            limit,
        ),
        budget=Budget(cfg.webhook_body_budget_bytes),
        heap=HeapKeeper(),
    )
    app.whatsapp = CallbackEndpoint(
        "whatsapp", META_SIGNATURE, app_secrets, lambda body, _: parse_meta(body, rooms), limit, runtime
    )
    app.generic = CallbackEndpoint("generic", GENERIC_SIGNATURE, generic_secrets, parse_generic, limit, runtime)
    twilio_tokens = [s.get_secret_value().encode() for s in cfg.webhook_twilio_auth_tokens]
    app.endpoints = {
        "whatsapp": app.whatsapp,
        # Messenger and Instagram sign with the Meta app's secret, as WhatsApp does.
        "messenger": CallbackEndpoint(
            "messenger",
            META_SIGNATURE,
            app_secrets,
            lambda body, _: parse_messenger(body, rooms, "messenger"),
            limit,
            runtime,
        ),
        "instagram": CallbackEndpoint(
            "instagram",
            META_SIGNATURE,
            app_secrets,
            lambda body, _: parse_messenger(body, rooms, "instagram"),
            limit,
            runtime,
        ),
        # Twilio's parser gets the public URL it called (its query carries inturn's callback data).
        "twilio": TwilioEndpoint(
            twilio_tokens,
            lambda body, url: parse_twilio(body, url, rooms, now_ms()),
            limit,
            runtime,
            cfg.webhook_public_base_url,
        ),
    }

    # The two POST routes below are what the OpenAPI document shows; WebhookApp answers these requests before
    # FastAPI routes them, through the same CallbackEndpoint.answer these handlers call.
    @app.post(
        "/webhooks/whatsapp",
        summary="WhatsApp status callbacks",
        **openapi.signed_callback("X-Hub-Signature-256", "Meta app secret", openapi.META_BODY),
    )
    async def whatsapp_statuses(request: Request) -> Response:
        """Each status (sent, delivered, read, failed) becomes an ack on the room's acks partition."""
        return _answered(await app.whatsapp.answer(request.scope, request.receive, "whatsapp"))

    handshake: dict[int | str, dict[str, Any]] = {
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "The challenge."},
        403: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "Wrong mode or token."},
    }

    @app.get(
        "/webhooks/whatsapp",
        summary="Meta's verification handshake",
        response_class=PlainTextResponse,
        responses=handshake,
    )
    async def whatsapp_verify(
        mode: str | None = Query(None, alias="hub.mode"),
        token: str | None = Query(None, alias="hub.verify_token"),
        challenge: str | None = Query(None, alias="hub.challenge"),
    ) -> Response:
        """Echo ``hub.challenge`` when ``hub.mode`` is subscribe and ``hub.verify_token`` is right."""
        right = bool(verify_token) and token is not None and hmac.compare_digest(token.encode(), verify_token)
        if mode == "subscribe" and right and challenge is not None:
            metrics.REQUESTS.labels("whatsapp_verify", "ok").inc()
            return PlainTextResponse(challenge)
        metrics.REQUESTS.labels("whatsapp_verify", "forbidden").inc()
        return PlainTextResponse("verification refused", status_code=403)

    for path, named in PLATFORM_PATHS.items():
        if named == "whatsapp":
            continue
        _document_platform(app, path, named)
        if named in ("messenger", "instagram"):  # Meta's handshake, as for WhatsApp
            app.add_api_route(
                path,
                whatsapp_verify,
                methods=["GET"],
                summary=f"Meta's verification handshake ({named})",
                response_class=PlainTextResponse,
                responses=handshake,
                name=f"{named}_verify",
            )

    @app.post(
        "/webhooks/generic/{platform}",
        summary="Acks of any platform, inturn's JSON format",
        **openapi.signed_callback("X-Inturn-Signature-256", "generic secret", openapi.GENERIC_BODY),
    )
    async def generic_acks(request: Request, platform: str) -> Response:
        """Each ack is published as given, on the room's acks partition, with ``platform`` from the path."""
        return _answered(await app.generic.answer(request.scope, request.receive, platform))

    _add_probes(app, runtime, cfg.webhook_ready_max_age_s)
    return app


async def _learn_dead_letter_limit(cfg: WebhookSettings, intake: AckIntake) -> None:
    """Set the intake's dead-letter record limit: the producer's message.max.bytes (librdkafka's default) against
    the dead-letter topic's max.message.bytes as the broker reports it (Kafka's default when it does not answer)."""
    topic_max = await asyncio.to_thread(dead_letters.topic_max_message_bytes, make_admin(cfg), cfg.topic_dlq)
    intake.dead_letter_limit = dead_letters.record_limit(topic_max=topic_max or dead_letters.TOPIC_MAX_MESSAGE_BYTES)
    log.info(
        "dead_letter_limit",
        topic=cfg.topic_dlq,
        topic_max_message_bytes=topic_max,
        record_limit=intake.dead_letter_limit,
    )


def _document_platform(app: WebhookApp, path: str, platform: str) -> None:
    """A FastAPI route for ``path`` (what the OpenAPI document shows; ``WebhookApp`` answers before routing)."""
    header = "X-Twilio-Signature" if platform == "twilio" else "X-Hub-Signature-256"

    async def statuses(request: Request) -> Response:
        return _answered(await app.endpoints[platform].answer(request.scope, request.receive, platform))

    statuses.__doc__ = f"{platform} status callbacks: each status becomes an ack (docs/platforms.md)."
    app.add_api_route(
        path,
        statuses,
        methods=["POST"],
        summary=f"{platform.capitalize()} status callbacks",
        name=f"{platform}_statuses",
        **openapi.signed_callback(header, f"{platform} secret"),
    )


def _probe(answer: tuple[int, bytes]) -> Response:
    status, body = answer
    return Response(body, status_code=status, media_type="application/json")


def _add_probes(app: FastAPI, runtime: _Runtime, max_age: float) -> None:
    health: dict[int | str, dict[str, Any]] = {200: {"model": openapi.Health, "description": "OK."}}

    # WebhookApp answers GET /healthz before FastAPI routes it, with the same bytes; this route documents it.
    @app.get(HEALTHZ_PATH, summary="Liveness: the process serves requests", responses=health, response_model=None)
    async def healthz() -> Response:
        """Always 200 while the process can answer."""
        return _probe((_HEALTHZ_STATUS, _HEALTHZ))

    @app.get(
        "/readyz",
        summary="Readiness: Kafka answered recently",
        response_model=None,
        responses={
            200: {"model": openapi.Ready, "description": "Kafka answered within the readiness window."},
            503: {"model": openapi.Ready, "description": "Kafka not reachable recently."},
        },
    )
    async def readyz() -> Response:
        """200 when Kafka answered within the readiness window, else 503."""
        age = runtime.kafka_age()
        kafka_ok = age is not None and age < max_age
        metrics.KAFKA_REACHABLE.set(1 if kafka_ok else 0)
        stalled = runtime.beat.age()
        if stalled < max_age:
            return _probe(probes.ready_answer(kafka_ok, {"kafka_last_ok_s": age}))
        return _probe(probes.ready_answer(False, {"kafka_last_ok_s": age, "event_loop_stalled_s": round(stalled, 1)}))

    @app.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
    async def prometheus() -> Response:
        """The process's metrics in Prometheus text format."""
        return Response(exposition(), media_type=CONTENT_TYPE_LATEST)


def app_from_env() -> WebhookApp:
    """The application with settings from the environment (uvicorn ``--factory`` entry point)."""
    from inturn import logs

    cfg = load(WebhookSettings)
    logs.configure(cfg.log_format, cfg.log_level)
    app = serving_app(cfg)
    settle_heap()
    release_memory_after_bodies()  # in each serving process: bodies of 128 KiB or more unmapped when freed
    return app


def serving_app(cfg: WebhookSettings) -> WebhookApp:
    """The application as a server runs it (``app_from_env``): ``create_app``, with the internal port served from
    a thread and event loop of its own (``inturn_webhook.internal``), which the lifespan starts and stops."""
    app = create_app(cfg)
    app.internal_server = InternalServer(
        app,
        app.guard,
        cfg.webhook_host,
        cfg.webhook_internal_port,
        shared=cfg.webhook_workers > 1,
        keepalive_s=cfg.webhook_keepalive_timeout_s,
    )
    return app


#: Allocations between two young-generation collections (CPython's default: 700).
GC_YOUNG_THRESHOLD = 10_000


def settle_heap() -> None:
    """Tune the cyclic garbage collector for serving, once the application is built (``app_from_env``): what
    start-up built is frozen and young collections run every ``GC_YOUNG_THRESHOLD`` allocations
    (``inturn.runtime.tune_gc``, as the worker's).

    A callback waits tens of milliseconds for Kafka with its objects alive, so with hundreds in flight the default
    young threshold (700 allocations) ran a collection every few requests and promoted waiting requests' objects to
    older generations, whose collections then scanned them again: measured as the webhook benchmark drives it (4
    rounds, order alternated, load 8-13), 255 against 295 µs of CPU per single-status callback. Memory is not at
    stake: ``GC_YOUNG_THRESHOLD`` allocations at most wait.
    """
    tune_gc(GC_YOUNG_THRESHOLD)
