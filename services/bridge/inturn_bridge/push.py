"""Push mode: the HTTP endpoint a Pub/Sub push subscription posts its envelopes to.

Pub/Sub acks a pushed message on 102, 200, 201, 202 or 204 and retries on anything else. Answers:

- 200 ``{"status": "written"}``: the message is on ``inturn.messages`` (Kafka confirmed);
- 200 ``{"status": "duplicate"}``: a redelivery of a message already written; not written again;
- 202 ``{"status": "dead_lettered", "reason": ...}``: poison, now on ``inturn.dlq`` (acked, so it
  does not loop; 202 tells a human reading logs that it was accepted but not delivered);
- 400: not a Pub/Sub push envelope (nothing written; Pub/Sub never sends these);
- 401: OIDC verification configured and the token missing, invalid, or of another issuer or account;
- 413: a body larger than any Pub/Sub message can be;
- 503 ``{"status": "not_written", "reason": ...}``: Kafka did not confirm (or the room is waiting
  for an earlier message, or the bridge is draining); Pub/Sub delivers it again.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from datetime import datetime
from typing import Any

import orjson
import structlog
from aiohttp import web

from inturn.metrics import bridge as metrics
from inturn_bridge.convert import PubsubRecord
from inturn_bridge.oidc import PushAuth, TokenRejected
from inturn_bridge.relay import NotWritten, Outcome, Relay

log = structlog.get_logger("inturn.bridge")

#: Pub/Sub messages are at most 10 MB; base64 and the envelope make that ~13.4 MB of JSON.
MAX_ENVELOPE_BYTES = 16 * 1024 * 1024


class EnvelopeError(ValueError):
    """The request body is not a Pub/Sub push envelope."""


def parse_envelope(body: bytes) -> PubsubRecord:
    """The message inside a push envelope; ``EnvelopeError`` naming what is wrong."""
    try:
        envelope = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise EnvelopeError(f"body is not JSON: {exc}") from exc
    message = envelope.get("message") if isinstance(envelope, dict) else None
    if not isinstance(message, dict):
        raise EnvelopeError("no 'message' object in the envelope")
    message_id = message.get("messageId") or message.get("message_id")
    if not isinstance(message_id, str) or not message_id:
        raise EnvelopeError("message.messageId is missing")
    attributes = message.get("attributes") or {}
    if not isinstance(attributes, dict) or not all(isinstance(v, str) for v in attributes.values()):
        raise EnvelopeError("message.attributes is not an object of strings")
    encoded = message.get("data", "")
    if not isinstance(encoded, str):
        raise EnvelopeError("message.data is not a base64 string")
    try:
        data = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise EnvelopeError(f"message.data is not valid base64: {exc}") from exc
    ordering_key = message.get("orderingKey") or message.get("ordering_key") or ""
    if not isinstance(ordering_key, str):
        raise EnvelopeError("message.orderingKey is not a string")
    return PubsubRecord(
        message_id=message_id,
        data=data,
        attributes=attributes,
        ordering_key=ordering_key,
        publish_time_ms=_publish_time_ms(message.get("publishTime") or message.get("publish_time")),
    )


def _publish_time_ms(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        # RFC 3339 with up to nanoseconds ("2021-02-26T19:13:55.749Z"); fromisoformat takes 6 digits.
        head, _, frac = value.rstrip("Z").partition(".")
        stamp = datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00")
    except ValueError:
        return None
    return int(stamp.timestamp() * 1000)


class PushEndpoint:
    """The aiohttp handler of push requests."""

    def __init__(self, relay: Relay, auth: PushAuth | None, draining: asyncio.Event) -> None:
        self._relay = relay
        self._auth = auth
        self._draining = draining

    async def handle(self, request: web.Request) -> web.Response:
        """Answer one push request (see the module docstring for the statuses)."""
        response = await self._answer(request)
        metrics.PUSH_REQUESTS.labels(str(response.status)).inc()
        return response

    async def _answer(self, request: web.Request) -> web.Response:
        if self._auth is not None:
            try:
                await self._auth.verify(request.headers.get("Authorization"))
            except TokenRejected as exc:
                log.warning("bridge.push_token_rejected", status=exc.status, reason=exc.reason)
                return _json(exc.status, {"status": "rejected", "reason": exc.reason})
        try:
            record = parse_envelope(await request.read())
        except web.HTTPRequestEntityTooLarge:
            return _json(413, {"status": "rejected", "reason": f"body over {MAX_ENVELOPE_BYTES} bytes"})
        except EnvelopeError as exc:
            return _json(400, {"status": "rejected", "reason": str(exc)})
        if self._draining.is_set():
            metrics.NACKS.labels("push", "draining").inc()
            metrics.MESSAGES.labels("push", "nacked").inc()
            return _json(503, {"status": "not_written", "reason": "draining"})
        with structlog.contextvars.bound_contextvars(pubsub_message_id=record.message_id):
            try:
                settled = await asyncio.wrap_future(self._relay.submit(record))
            except NotWritten as exc:
                return _json(503, {"status": "not_written", "reason": exc.reason})
        if settled.outcome is Outcome.DEAD_LETTERED:
            return _json(202, {"status": settled.outcome.value, "reason": settled.reason})
        body: dict[str, Any] = {"status": settled.outcome.value}
        if settled.delivery is not None:
            body.update(partition=settled.delivery.partition, offset=settled.delivery.offset)
        return _json(200, body)


def _json(status: int, body: dict[str, Any]) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")
