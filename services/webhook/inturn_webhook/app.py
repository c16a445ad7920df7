"""The webhook's FastAPI application: platform status callbacks in, acks on Kafka out.

Every POST goes the same way, cheapest refusal first: signature header present and well formed
(else 401), body within the limit (else 413), signature right (else 401), body readable (else it
is dead-lettered whole and answered 200: retrying cannot fix it), then each status is produced and
the answer waits for Kafka (200, or 503 so that the platform retries). The ``lifespan`` owns the
Kafka producer and a probe that keeps ``/readyz`` honest.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import structlog
from confluent_kafka import KafkaException
from fastapi import FastAPI, Query, Request, Response
from fastapi.responses import PlainTextResponse

from inturn import __version__, probes
from inturn.errors import SchemaError
from inturn.kafka import AsyncProducer, make_producer
from inturn.metrics import CONTENT_TYPE_LATEST, exposition
from inturn.metrics import webhook as metrics
from inturn.settings import load
from inturn.settings.webhook import WebhookSettings
from inturn_webhook import openapi
from inturn_webhook.body import BodyTooLargeError, read_limited
from inturn_webhook.intake import AckIntake, KafkaNotConfirmedError
from inturn_webhook.rooms import RoomResolver
from inturn_webhook.signature import SignatureError, verify
from inturn_webhook.statuses import Callback, parse_generic, parse_meta

log = structlog.get_logger("inturn.webhook")

META_SIGNATURE = "x-hub-signature-256"
GENERIC_SIGNATURE = "x-inturn-signature-256"


def _json(status_code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status_code, media_type="application/json", headers=headers)


class _Runtime:
    """What the lifespan starts: the intake (with its producer) and Kafka's last sign of life."""

    intake: AckIntake | None = None
    kafka_ok_at: float = 0.0  # monotonic

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


def create_app(settings: WebhookSettings | None = None) -> FastAPI:
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
        probe = asyncio.create_task(
            _probe_kafka(producer, cfg.topic_acks, runtime, cfg.webhook_probe_interval_s, cfg.webhook_ready_max_age_s)
        )
        log.info("webhook_started", acks_topic=cfg.topic_acks, dlq_topic=cfg.topic_dlq, secrets=len(app_secrets))
        # Real platform statuses carry no inturn callback data when the send did not attach it: say at start-up
        # what becomes of them, rather than only through a growing dead-letter count.
        room_log = log.info if rooms.fallback != "none" else log.warning
        room_log("room_lookup", **rooms.describe())
        try:
            yield
        finally:
            probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probe
            # Requests are all answered by now; what is still unconfirmed was answered 503 and will be retried.
            left = await producer.close(cfg.webhook_kafka_confirm_timeout_ms / 1000)
            runtime.intake = None
            log.info("webhook_stopped", undelivered=left)

    app = FastAPI(
        title="inturn webhook",
        version=__version__,
        description="Turns messaging platforms' status callbacks into acks on Kafka (key = room_id).",
        lifespan=lifespan,
        # inturn's metrics are Prometheus (/metrics): without this FastAPI looks up OpenTelemetry providers on
        # every request, a cost the size of a status's own parsing.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )

    async def accept(
        request: Request,
        endpoint: str,
        header: str,
        secrets: list[bytes],
        parse: Callable[[bytes], Callback],
        platform: str,
    ) -> Response:
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(endpoint=endpoint, platform=platform)
        signature = request.headers.get(header)
        if signature is None or not signature.startswith("sha256="):  # refused before reading the body
            return _refuse_signature(endpoint, "missing or malformed signature header")
        try:
            body = await read_limited(request, limit)
            verify(signature, body, secrets)
        except SignatureError as exc:
            return _refuse_signature(endpoint, str(exc))
        except BodyTooLargeError as exc:
            metrics.REQUESTS.labels(endpoint, "too_large").inc()
            log.warning("body_too_large", reason=str(exc))
            return _json(413, {"detail": str(exc)})
        intake = runtime.intake
        if intake is None:  # not started (or stopping): nothing can be confirmed
            return _json(503, {"detail": "not started"}, {"Retry-After": "1"})
        try:
            try:
                callback = parse(body)
            except SchemaError as exc:
                await intake.dead_letter(exc.reason, body)
                metrics.REQUESTS.labels(endpoint, "dead_lettered").inc()
                return _json(200, {**_EMPTY, "dead_lettered": 1, "reason": exc.reason})
            outcome = await intake.deliver(platform, callback)
        except KafkaNotConfirmedError as exc:
            metrics.REQUESTS.labels(endpoint, "kafka_timeout").inc()
            log.warning("kafka_not_confirmed", reason=str(exc))
            return _json(503, {"detail": str(exc)}, {"Retry-After": "1"})
        metrics.REQUESTS.labels(endpoint, "ok").inc()
        return _json(200, outcome.as_dict())

    @app.post(
        "/webhooks/whatsapp",
        summary="WhatsApp status callbacks",
        response_model=None,
        responses=openapi.POST_RESPONSES,
        openapi_extra={
            "requestBody": openapi.META_BODY,
            "parameters": [openapi.signature_header("X-Hub-Signature-256", "Meta app secret")],
        },
    )
    async def whatsapp_statuses(request: Request) -> Response:
        """Each status (sent, delivered, read, failed) becomes an ack on the room's acks partition."""
        return await accept(
            request, "whatsapp", META_SIGNATURE, app_secrets, lambda body: parse_meta(body, rooms), "whatsapp"
        )

    @app.get(
        "/webhooks/whatsapp",
        summary="Meta's verification handshake",
        response_class=PlainTextResponse,
        responses={
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "The challenge."},
            403: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "Wrong mode or token."},
        },
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

    @app.post(
        "/webhooks/generic/{platform}",
        summary="Acks of any platform, inturn's JSON format",
        response_model=None,
        responses=openapi.POST_RESPONSES,
        openapi_extra={
            "requestBody": openapi.GENERIC_BODY,
            "parameters": [openapi.signature_header("X-Inturn-Signature-256", "generic secret")],
        },
    )
    async def generic_acks(request: Request, platform: str) -> Response:
        """Each ack is published as given, on the room's acks partition, with ``platform`` from the path."""
        return await accept(
            request, "generic", GENERIC_SIGNATURE, generic_secrets, lambda body: parse_generic(body, platform), platform
        )

    _add_probes(app, runtime, cfg.webhook_ready_max_age_s)
    return app


def _refuse_signature(endpoint: str, reason: str) -> Response:
    metrics.REQUESTS.labels(endpoint, "bad_signature").inc()
    log.warning("signature_refused", reason=reason)
    return _json(401, {"detail": reason})


def _probe(answer: tuple[int, bytes]) -> Response:
    status, body = answer
    return Response(body, status_code=status, media_type="application/json")


_EMPTY = {"published": 0, "replayed": 0, "unknown_room": 0, "dead_lettered": 0, "ignored": 0}


def _add_probes(app: FastAPI, runtime: _Runtime, max_age: float) -> None:
    health: dict[int | str, dict[str, Any]] = {200: {"model": openapi.Health, "description": "OK."}}

    @app.get("/healthz", summary="Liveness: the process serves requests", responses=health, response_model=None)
    async def healthz() -> Response:
        """Always 200 while the process can answer."""
        return _probe(probes.health_answer(True, {}))

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
        ready = age is not None and age < max_age
        metrics.KAFKA_REACHABLE.set(1 if ready else 0)
        return _probe(probes.ready_answer(ready, {"kafka_last_ok_s": age}))

    @app.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
    async def prometheus() -> Response:
        """The process's metrics in Prometheus text format."""
        return Response(exposition(), media_type=CONTENT_TYPE_LATEST)


def app_from_env() -> FastAPI:
    """The application with settings from the environment (uvicorn ``--factory`` entry point)."""
    from inturn import logs

    cfg = load(WebhookSettings)
    logs.configure(cfg.log_format, cfg.log_level)
    return create_app(cfg)
