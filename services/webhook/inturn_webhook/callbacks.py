"""The status callback endpoints (``POST /webhooks/whatsapp``, ``POST /webhooks/generic/{platform}``) as plain ASGI.

Platforms call once per status, so what one request costs sets how many replicas a user needs. FastAPI's route
matching, dependency solving and Request/Response objects cost more CPU than a callback's own work, so
``inturn_webhook.app.WebhookApp`` hands these two POSTs to ``CallbackEndpoint.serve`` before FastAPI sees them;
FastAPI keeps the other routes and the OpenAPI document, which still describes these endpoints (its route for
them answers through the same ``CallbackEndpoint.answer``).

Every callback goes the same way, cheapest refusal first: signature header present and of the route's form (else
401, body not read; the server refused such a request before it, ``inturn_webhook.guard``), body within the limit
(else 413), signature right (else 401), body readable (else it is dead-lettered, whole when it fits the topic's
record limit, and answered 200: retrying cannot fix it), then each status is produced and the answer waits for
Kafka (200, or 503 with ``Retry-After: 1`` so that the platform retries).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import orjson
import structlog
from starlette.types import Receive, Scope, Send

from inturn.errors import SchemaError
from inturn.metrics import webhook as metrics
from inturn_webhook.body import BodyTooLargeError, ClientGoneError, read_limited
from inturn_webhook.confirmations import KafkaNotConfirmedError, Outcome
from inturn_webhook.intake import AckIntake
from inturn_webhook.platforms import form_params, public_url, verify_twilio
from inturn_webhook.signature import Secret, SignatureError, signature_form, verify
from inturn_webhook.statuses import Callback

log = structlog.get_logger("inturn.webhook")

#: Parses a signed body from ``platform`` into its statuses; ``SchemaError`` when it is not a callback at all.
Parser = Callable[[bytes, str], Callback]

_CONTENT_LENGTH = b"content-length"
_JSON_HEADERS = ((b"content-type", b"application/json"),)
_RETRY_HEADERS = ((b"content-type", b"application/json"), (b"retry-after", b"1"))
_EMPTY: dict[str, Any] = {"published": 0, "replayed": 0, "unknown_room": 0, "dead_lettered": 0, "ignored": 0}


class Started(Protocol):
    """What the lifespan started: the intake, None before start-up and after shutdown."""

    intake: AckIntake | None


class Answer:
    """A callback's answer: status, JSON body, and whether the platform should retry (``Retry-After: 1``)."""

    __slots__ = ("_start", "body", "retry", "status")

    def __init__(self, status: int, body: bytes, *, retry: bool = False) -> None:
        self.status = status
        self.body = body
        self.retry = retry
        self._start: dict[str, Any] | None = None

    @classmethod
    def json(cls, status: int, document: dict[str, Any], *, retry: bool = False) -> Answer:
        """``document`` as the JSON body."""
        return cls(status, orjson.dumps(document), retry=retry)

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The answer's headers as ASGI sends them (what Starlette's ``Response`` would set)."""
        return [(_CONTENT_LENGTH, b"%d" % len(self.body)), *(_RETRY_HEADERS if self.retry else _JSON_HEADERS)]

    def start(self) -> dict[str, Any]:
        """The ``http.response.start`` message (built once per answer; a server only reads it)."""
        if self._start is None:
            self._start = {"type": "http.response.start", "status": self.status, "headers": self.headers()}
        return self._start


_OK_ANSWERS: dict[tuple[int, ...], Answer] = {}
_OK_ANSWERS_MAX = 1024  # distinct outcomes kept; a callback rarely carries more than a few statuses
#: An outcome's every field, in order (one C call): the key of its kept answer, whatever fields Outcome gains.
_OUTCOME_KEY = operator.attrgetter(*(field.name for field in dataclasses.fields(Outcome)))


def _ok_answer(outcome: Outcome) -> Answer:
    """The 200 answer of ``outcome``; the answers of the outcomes seen before are kept, with their headers (most
    callbacks carry one status, so a few outcomes make nearly every answer)."""
    key: tuple[int, ...] = _OUTCOME_KEY(outcome)
    answer = _OK_ANSWERS.get(key)
    if answer is None:
        answer = Answer(200, orjson.dumps(outcome))  # orjson writes the dataclass's fields in order, no dict between
        if len(_OK_ANSWERS) < _OK_ANSWERS_MAX:
            _OK_ANSWERS[key] = answer
    return answer


class CallbackEndpoint:
    """One callback endpoint: its signature header and secrets, its parser, and its request counters (bound once)."""

    def __init__(
        self,
        name: str,
        signature_header: str,
        secrets: Sequence[bytes],
        parse: Parser,
        limit: int,
        started: Started,
    ) -> None:
        self.name = name
        self._header = signature_header.lower().encode("latin-1")  # ASGI header names are lower-case bytes
        self._form = signature_form(self._header)  # the well-formed header, checked before the body is read
        self._secrets = [Secret(secret) for secret in secrets]
        self._parse = parse
        self._limit = limit
        self._started = started
        requests = metrics.REQUESTS
        self._ok = requests.labels(name, "ok")
        self._bad_signature = requests.labels(name, "bad_signature")
        self._too_large = requests.labels(name, "too_large")
        self._dead_lettered = requests.labels(name, "dead_lettered")
        self._kafka_timeout = requests.labels(name, "kafka_timeout")

    async def serve(self, scope: Scope, receive: Receive, send: Send, platform: str) -> None:
        """Answer one callback request over ASGI (nothing, if the client left before sending its body)."""
        try:
            answer = await self.answer(scope, receive, platform)
        except ClientGoneError:
            return  # nobody to answer; nothing was published
        await send(answer.start())
        await send({"type": "http.response.body", "body": answer.body})

    async def answer(self, scope: Scope, receive: Receive, platform: str) -> Answer:
        """Check, parse and publish one callback; the answer once Kafka confirmed everything (or why not)."""
        signature: bytes | None = None
        declared: bytes | None = None
        header = self._header
        for name, value in scope["headers"]:  # one pass; the first of repeated headers counts, as in Starlette
            if name == header:
                if signature is None:
                    signature = value
            elif name == _CONTENT_LENGTH and declared is None:
                declared = value
        if signature is None or self._form.fullmatch(signature.strip()) is None:  # refused before reading the body
            return self._refuse_signature(platform, "missing or malformed signature header")
        try:
            if declared is not None and declared.isdigit() and int(declared) <= self._limit:
                # The usual case: a length within the limit and the whole body in one ASGI message.
                message = await receive()
                body = message.get("body", b"")
                if message["type"] != "http.request" or message.get("more_body", False) or len(body) > self._limit:
                    body = await read_limited(receive, declared, self._limit, message)
            else:
                body = await read_limited(receive, declared, self._limit)
            called = self._verify(scope, signature.decode("latin-1"), body)
        except SignatureError as unsigned:
            return self._refuse_signature(platform, str(unsigned))
        except BodyTooLargeError as too_large:
            self._too_large.inc()
            log.warning("body_too_large", endpoint=self.name, platform=platform, reason=str(too_large))
            return Answer.json(413, {"detail": str(too_large)})
        intake = self._started.intake
        if intake is None:  # not started (or stopping): nothing can be confirmed
            return Answer.json(503, {"detail": "not started"}, retry=True)
        dead_lettered: str | None = None  # why the whole body was dead-lettered, if it was
        try:
            try:
                callback = self._parse(body, called or platform)
            except SchemaError as unreadable:
                pending = intake.dead_letter(platform, unreadable.reason, body)
                dead_lettered = unreadable.reason
            else:
                pending = intake.submit(platform, callback)
            if pending.expected:  # nothing to wait for when every status was a replay or an ignored change
                # Awaited here, not in a coroutine of the intake's: the callback's one suspension is this one.
                intake.confirmed(platform, pending, await pending.done)
        except KafkaNotConfirmedError as unconfirmed:
            self._kafka_timeout.inc()
            log.warning("kafka_not_confirmed", endpoint=self.name, platform=platform, reason=str(unconfirmed))
            return Answer.json(503, {"detail": str(unconfirmed)}, retry=True)
        if dead_lettered is not None:
            self._dead_lettered.inc()
            return Answer.json(200, {**_EMPTY, "dead_lettered": 1, "reason": dead_lettered})
        self._ok.inc()
        return _ok_answer(pending.outcome)

    def _verify(self, scope: Scope, signature: str, body: bytes) -> str | None:
        """Check the signature over the body (``SignatureError`` if wrong); what the parser gets instead of the
        platform name, if anything (Twilio's endpoint: the public URL the platform called)."""
        verify(signature, body, self._secrets)
        return None

    def _refuse_signature(self, platform: str, reason: str) -> Answer:
        self._bad_signature.inc()
        log.warning("signature_refused", endpoint=self.name, platform=platform, reason=reason)
        return Answer.json(401, {"detail": reason})


class TwilioEndpoint(CallbackEndpoint):
    """Twilio's status callbacks: ``X-Twilio-Signature``, Base64 HMAC-SHA1 with the Auth Token over the public URL
    Twilio called followed by the form's parameters sorted by name (``inturn_webhook.platforms.verify_twilio``).
    The URL is rebuilt from the request target as received, behind a proxy from ``X-Forwarded-Proto`` /
    ``X-Forwarded-Host``, or from ``INTURN_WEBHOOK_PUBLIC_BASE_URL`` when set (then no header is trusted). The parser
    is called with that URL (its query carries inturn's callback data) instead of the platform name."""

    def __init__(
        self, auth_tokens: Sequence[bytes], parse: Parser, limit: int, started: Started, public_base_url: str | None
    ) -> None:
        super().__init__("twilio", "x-twilio-signature", [], parse, limit, started)
        self._tokens = list(auth_tokens)
        self._public_base_url = public_base_url

    def _verify(self, scope: Scope, signature: str, body: bytes) -> str | None:
        headers = {name: value.decode("latin-1") for name, value in scope["headers"] if name in _URL_HEADERS}
        target = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        try:
            url = public_url(
                target,
                scheme=scope.get("scheme", "http"),
                host=headers.get(b"host"),
                forwarded_proto=headers.get(b"x-forwarded-proto"),
                forwarded_host=headers.get(b"x-forwarded-host"),
                public_base_url=self._public_base_url,
            )
            params = form_params(body)
        except (ValueError, SchemaError) as exc:
            raise SignatureError(f"cannot check the signature: {exc}") from exc
        verify_twilio(signature, url, params, self._tokens)
        return url


_URL_HEADERS = frozenset({b"host", b"x-forwarded-proto", b"x-forwarded-host"})
