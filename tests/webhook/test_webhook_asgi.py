"""The callback POSTs served below FastAPI (``WebhookApp`` → ``CallbackEndpoint``): what reaches them, what they
answer before Kafka is involved, and that FastAPI's documented route for them answers the same bytes."""

from __future__ import annotations

import gc
import hashlib
import hmac
from dataclasses import fields
from typing import Any

import orjson
import pytest
import structlog
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from starlette.types import Message
from structlog.testing import capture_logs

import inturn_webhook.callbacks
from inturn import schemas
from inturn.schemas import DeadLetter
from inturn.settings import KafkaSettings
from inturn_webhook import create_app
from inturn_webhook.app import GC_YOUNG_THRESHOLD, WebhookApp, settle_heap
from inturn_webhook.body import BodyTooLargeError, ClientGoneError, read_limited
from inturn_webhook.callbacks import _ok_answer  # the cache of 200 answers the callback path uses
from inturn_webhook.confirmations import Outcome
from inturn_webhook.signature import Secret, SignatureError, sign, verify

from .support import APP_SECRET, GENERIC_SECRET, MAX_BODY, Webhook, read_topic, webhook_settings_for

Answered = tuple[int, dict[bytes, bytes], bytes]  # status, headers, body
UNANSWERED: Answered = (0, {}, b"")  # nothing sent


@pytest.fixture
def app() -> WebhookApp:
    """The application, not started (no lifespan: no Kafka producer, so signed callbacks are answered 503)."""
    return create_app(webhook_settings_for(KafkaSettings(kafka_bootstrap="127.0.0.1:9")))


def _scope(method: str, path: str, headers: dict[str, str], root_path: str = "", port: int = 80) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": root_path,
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("webhook", port),
    }


async def call(
    app: Any,
    method: str,
    path: str,
    headers: dict[str, str],
    messages: list[Message],
    root_path: str = "",
    port: int = 80,
) -> Answered:
    """Drive one request through ``app`` as an ASGI server would; (status, headers, body), or ``UNANSWERED``."""
    incoming = iter(messages)
    sent: list[Message] = []

    async def receive() -> Message:
        return next(incoming, {"type": "http.disconnect"})

    async def send(message: Message) -> None:
        sent.append(message)

    await app(_scope(method, path, headers, root_path, port), receive, send)
    if not sent:
        return UNANSWERED
    start, *bodies = sent
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in bodies)


def _body(data: bytes) -> list[Message]:
    return [{"type": "http.request", "body": data, "more_body": False}]


def _signed(data: bytes, header: str = "X-Hub-Signature-256", secret: str = APP_SECRET) -> dict[str, str]:
    return {header: sign(data, secret.encode()), "Content-Type": "application/json"}


async def test_a_callback_post_is_answered_without_fastapis_routing(
    app: WebhookApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FastAPI, "__call__", _not_fastapi)
    data = b'{"entry": []}'
    answered = await call(app, "POST", "/webhooks/whatsapp", _signed(data), _body(data))
    assert answered[0] == 503  # not started: nothing can be confirmed
    generic = _signed(data, "X-Inturn-Signature-256", GENERIC_SECRET)
    answered = await call(app, "POST", "/webhooks/generic/instagram", generic, _body(data))
    assert answered[0] == 503


async def test_healthz_is_answered_without_fastapi_with_the_bytes_of_its_documented_route(
    app: WebhookApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    documented = next(r for r in app.routes if getattr(r, "path", None) == "/healthz")
    expected = await documented.endpoint()  # type: ignore[attr-defined]  # an APIRoute: routes are typed BaseRoute
    monkeypatch.setattr(FastAPI, "__call__", _not_fastapi)
    status, headers, body = await call(app, "GET", "/healthz", {}, _body(b""), port=INTERNAL)
    assert (status, body) == (200, expected.body) == (expected.status_code, b'{"status":"ok"}')
    assert headers == {k: v for k, v in expected.raw_headers}


async def _not_fastapi(*_: object) -> None:
    raise AssertionError("reached FastAPI")


INTERNAL = 9090  # the internal port's default (INTURN_WEBHOOK_INTERNAL_PORT)


@pytest.mark.parametrize(
    ("method", "path", "port", "status"),
    [
        ("GET", "/webhooks/whatsapp", 80, 403),  # the handshake stays FastAPI's, refused without the token
        ("PUT", "/webhooks/whatsapp", 80, 404),  # the public port serves the callbacks and the handshake only
        ("POST", "/webhooks/generic/a/b", 80, 404),  # a platform is one path segment, as FastAPI's {platform}
        ("POST", "/webhooks/generic/", 80, 404),
        ("POST", "/webhooks/whatsapp/extra", 80, 404),
        ("GET", "/readyz", INTERNAL, 503),  # the readiness probe stays FastAPI's (not started: Kafka never answered)
        ("GET", "/metrics", INTERNAL, 200),
        ("GET", "/openapi.json", INTERNAL, 200),
        ("GET", "/docs", INTERNAL, 200),
        ("GET", "/redoc", INTERNAL, 200),
        ("POST", "/webhooks/whatsapp", INTERNAL, 404),  # no callback on the internal port
        ("GET", "/webhooks/whatsapp", INTERNAL, 404),
    ],
)
async def test_each_port_serves_its_own_routes(app: WebhookApp, method: str, path: str, port: int, status: int) -> None:
    answered = await call(app, method, path, {}, _body(b""), port=port)
    assert answered[0] == status


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz", "/openapi.json", "/docs", "/redoc"])
async def test_the_public_port_serves_no_probe_metric_or_document(app: WebhookApp, path: str) -> None:
    assert await call(app, "GET", path, {}, _body(b"")) == (
        404,
        {b"content-length": b"22", b"content-type": b"application/json"},
        b'{"detail":"Not Found"}',
    )


def _variants() -> dict[str, tuple[str, dict[str, str], list[Message]]]:
    data = b'{"entry": []}'
    big = b"x" * (MAX_BODY + 1)
    return {
        "no signature header": ("/webhooks/whatsapp", {}, _body(data)),
        "not sha256=": ("/webhooks/whatsapp", {"X-Hub-Signature-256": "md5=abc"}, _body(data)),
        "not 64 hex digits": ("/webhooks/whatsapp", {"X-Hub-Signature-256": "sha256=xyz"}, _body(data)),
        "wrong signature": ("/webhooks/whatsapp", {"X-Hub-Signature-256": "sha256=" + "0" * 64}, _body(data)),
        "the generic secret on meta": (
            "/webhooks/whatsapp",
            _signed(data, secret=GENERIC_SECRET),
            _body(data),
        ),
        "too large, announced": (
            "/webhooks/whatsapp",
            {**_signed(big), "Content-Length": str(len(big))},
            _body(big),
        ),
        "too large, chunked": (
            "/webhooks/whatsapp",
            _signed(big),
            [{"type": "http.request", "body": big[:MAX_BODY], "more_body": True}, *_body(big[MAX_BODY:])],
        ),
        "signed, not started": ("/webhooks/whatsapp", _signed(data), _body(data)),
        "generic, signed, not started": (
            "/webhooks/generic/instagram",
            _signed(data, "X-Inturn-Signature-256", GENERIC_SECRET),
            _body(data),
        ),
    }


@pytest.mark.parametrize("variant", list(_variants()))
async def test_fastapis_documented_route_answers_what_the_asgi_endpoint_answers(app: WebhookApp, variant: str) -> None:
    path, headers, messages = _variants()[variant]
    fast = await call(app, "POST", path, headers, messages)
    routed = await call(lambda *a: FastAPI.__call__(app, *a), "POST", path, headers, messages)
    assert fast == routed, variant  # status, body and headers (content-type, content-length, retry-after)
    expected = {
        "no signature header": 401,
        "not sha256=": 401,
        "not 64 hex digits": 401,
        "wrong signature": 401,
        "the generic secret on meta": 401,
        "too large, announced": 413,
        "too large, chunked": 413,
        "signed, not started": 503,
        "generic, signed, not started": 503,
    }[variant]
    assert fast[0] == expected
    if expected == 503:
        assert fast[1][b"retry-after"] == b"1"
    assert set(orjson.loads(fast[2])) == {"detail"}


async def test_the_callback_paths_are_matched_under_a_root_path_as_fastapi_matches_them(
    app: WebhookApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FastAPI, "__call__", _not_fastapi)
    answered = await call(app, "POST", "/hooks/webhooks/whatsapp", {}, _body(b""), root_path="/hooks")
    assert answered[0] == 401


async def test_a_client_that_leaves_before_its_body_is_not_answered_and_nothing_breaks(app: WebhookApp) -> None:
    headers = {"X-Hub-Signature-256": "sha256=" + "a" * 64}
    partial: list[Message] = [{"type": "http.request", "body": b"{", "more_body": True}]
    assert await call(app, "POST", "/webhooks/whatsapp", headers, partial) == UNANSWERED  # then http.disconnect


@pytest.fixture
def fresh_callbacks_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    """The callbacks' logger, not yet bound (loggers cache their processors on first use)."""
    monkeypatch.setattr(inturn_webhook.callbacks, "log", structlog.get_logger("inturn.webhook"))


@pytest.mark.usefixtures("fresh_callbacks_logger")
async def test_a_refused_signature_is_logged_and_counted_with_its_endpoint_and_platform(app: WebhookApp) -> None:
    labels = {"endpoint": "generic", "outcome": "bad_signature"}
    before = REGISTRY.get_sample_value("inturn_webhook_requests_total", labels) or 0
    with capture_logs() as logs:
        answered = await call(app, "POST", "/webhooks/generic/line", {}, _body(b"{}"))
    assert answered[0] == 401
    assert logs == [
        {
            "event": "signature_refused",
            "log_level": "warning",
            "endpoint": "generic",
            "platform": "line",
            "reason": "missing or malformed signature header",
        }
    ]
    assert REGISTRY.get_sample_value("inturn_webhook_requests_total", labels) == before + 1


def test_the_openapi_document_still_describes_both_callback_posts_and_the_handshake(app: WebhookApp) -> None:
    paths = app.openapi()["paths"]
    meta, generic = paths["/webhooks/whatsapp"], paths["/webhooks/generic/{platform}"]
    assert set(meta) == {"get", "post"}
    assert set(generic) == {"post"}
    for operation, header in ((meta["post"], "X-Hub-Signature-256"), (generic["post"], "X-Inturn-Signature-256")):
        assert operation["requestBody"]["required"] is True
        assert {"200", "401", "413", "503"} <= set(operation["responses"])
        assert header in {p["name"] for p in operation["parameters"]}
    assert "statuses" in orjson.dumps(meta["post"]["requestBody"]).decode()
    assert "platform" in {p["name"] for p in generic["post"]["parameters"]}


def _receive_of(messages: list[Message]) -> tuple[Any, Any]:
    incoming = iter(messages)
    pulled = 0

    async def receive() -> Message:
        nonlocal pulled
        pulled += 1
        return next(incoming, {"type": "http.disconnect"})

    return receive, lambda: pulled


async def test_a_body_in_several_messages_is_read_whole_and_a_body_past_the_limit_no_further() -> None:
    chunks: list[Message] = [{"type": "http.request", "body": b"ab", "more_body": True}] * 3
    receive, _ = _receive_of([*chunks, {"type": "http.request", "body": b"c", "more_body": False}])
    assert await read_limited(receive, None, 7) == b"abababc"

    receive, pulled = _receive_of(chunks * 10)
    with pytest.raises(BodyTooLargeError, match="exceeds the 5-byte limit"):
        await read_limited(receive, None, 5)
    assert pulled() == 3  # 6 bytes read: past the limit, and not a message more

    receive, pulled = _receive_of(chunks)
    with pytest.raises(BodyTooLargeError, match="Content-Length 6 exceeds the 5-byte limit"):
        await read_limited(receive, b"6", 5)
    assert pulled() == 0

    receive, _ = _receive_of(chunks[:1])
    with pytest.raises(ClientGoneError):
        await read_limited(receive, None, 100)


@given(secret=st.binary(max_size=200), body=st.binary(max_size=300))
def test_a_prepared_secret_computes_the_standard_hmac_sha256(secret: bytes, body: bytes) -> None:
    assert Secret(secret).digest(body) == hmac.new(secret, body, hashlib.sha256).digest()


def test_a_signature_with_whitespace_among_its_64_characters_is_malformed() -> None:
    body = b"{}"
    digest = sign(body, b"k").removeprefix("sha256=")
    spaced = "sha256=" + digest[:30] + " " + digest[32:] + "0"  # 64 characters, fromhex would skip the space
    with pytest.raises(SignatureError, match="expected 64 hex digits"):
        verify(spaced, body, [Secret(b"k")])
    verify("sha256=" + digest.upper(), body, [Secret(b"k")])


@pytest.mark.kafka
async def test_a_dead_lettered_body_is_answered_the_same_through_fastapis_documented_route(webhook: Webhook) -> None:
    data = b'{"entry": "not a list"}'
    fast = await call(webhook.app, "POST", "/webhooks/whatsapp", _signed(data), _body(data))
    routed = await call(
        lambda *a: FastAPI.__call__(webhook.app, *a), "POST", "/webhooks/whatsapp", _signed(data), _body(data)
    )
    assert fast == routed
    assert fast[0] == 200
    assert orjson.loads(fast[2]) == {
        "published": 0,
        "replayed": 0,
        "unknown_room": 0,
        "dead_lettered": 1,
        "ignored": 0,
        "reason": "entry: not a list",
    }
    letters = read_topic(webhook.settings, webhook.settings.topic_dlq, 2)
    assert [schemas.decode(DeadLetter, value).raw() for _, _, value in letters] == [data, data]


def test_the_served_application_leaves_start_up_objects_out_of_garbage_collection() -> None:
    threshold = gc.get_threshold()
    try:
        settle_heap()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *threshold[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


async def test_a_body_within_its_announced_length_is_read_whole_however_it_arrives(app: WebhookApp) -> None:
    # Not started: a body read whole and rightly signed is answered 503; read in part it would fail the signature.
    data = b'{"entry": []}'
    headers = {**_signed(data), "Content-Length": str(len(data))}
    in_parts: list[Message] = [
        {"type": "http.request", "body": data[:5], "more_body": True},
        {"type": "http.request", "body": data[5:], "more_body": False},
    ]
    assert (await call(app, "POST", "/webhooks/whatsapp", headers, in_parts))[0] == 503
    assert (await call(app, "POST", "/webhooks/whatsapp", headers, _body(data)))[0] == 503
    # A client sending more than it announced is refused at the limit all the same.
    over = b"x" * (MAX_BODY + 1)
    lying = {**_signed(over), "Content-Length": "10"}
    assert (await call(app, "POST", "/webhooks/whatsapp", lying, _body(over)))[0] == 413
    assert await call(app, "POST", "/webhooks/whatsapp", lying, []) == UNANSWERED  # left before its body


def test_a_kept_200_answer_is_the_one_of_its_own_outcome_for_every_field() -> None:
    _ok_answer(Outcome())  # the all-zero outcome's answer is kept first
    for field in fields(Outcome):
        outcome = Outcome(**{field.name: 1})
        assert orjson.loads(_ok_answer(outcome).body) == {f.name: int(f.name == field.name) for f in fields(Outcome)}
