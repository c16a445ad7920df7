"""Messenger, Instagram, Twilio and Telegram adapters over the transport, against a scripted server: what each
sends on the wire (written from each platform's documentation), and what each answer becomes for the worker."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest

from inturn.errors import PermanentPlatformError, TransientPlatformError
from inturn.platforms import (
    ADAPTERS,
    AckKind,
    InstagramAdapter,
    MessengerAdapter,
    PlatformAdapter,
    SendResult,
    TelegramAdapter,
    TwilioAdapter,
    watermark_covers,
)
from inturn.platforms.base import CALLBACK_HEADER
from inturn.platforms.twilio import CALLBACK_PARAM
from inturn.schemas import Message, decode_callback_data, now_ms
from inturn.settings.worker import PlatformSettings
from tests.platforms.wire import Conn, Request, respond, serve, stop


def _message(platform: str, account: str | None = None, recipient: str = "6543210", **payload: object) -> Message:
    return Message(
        room_id="room-7",
        message_id="m-7",
        platform=platform,
        account=account,
        recipient=recipient,
        payload=payload or {"type": "text", "text": {"body": "hello"}},
        created_at_ms=now_ms(),
    )


async def _exchange(
    cls: type[PlatformAdapter], message: Message, answer: bytes, *, partition: int | None = None, **settings: Any
) -> tuple[Request, object]:
    """Send ``message`` through ``cls`` to a server answering ``answer``: the request it read, and the result or
    the raised error."""
    seen: list[Request] = []

    async def handler(request: Request, conn: Conn) -> bool:
        seen.append(request)
        await conn.write(answer)
        return True

    server = await serve(handler)
    base = {f"{name}_base_url": server.url for name in ("messenger", "instagram", "twilio", "telegram")}
    adapter = cls(PlatformSettings.model_validate({**base, **settings}), 2, 2.0)
    outcome: object
    try:
        outcome = await adapter.send(adapter.prepare(message, partition))
    except (TransientPlatformError, PermanentPlatformError) as exc:
        outcome = exc
    finally:
        await adapter.close()
        await stop(server)
    return seen[0], outcome


def _request_line(request: Request) -> str:
    return request.head.split(b"\r\n", 1)[0].decode()


def _header(request: Request, name: str) -> str:
    for line in request.head.split(b"\r\n")[1:]:
        key, _, value = line.decode().partition(":")
        if key.lower() == name.lower():
            return value.strip()
    raise AssertionError(f"no {name} header")


def test_every_platform_is_registered_with_its_ack_kind() -> None:
    kinds = {name: cls.ack_kind for name, cls in ADAPTERS.items()}
    assert kinds == {
        "whatsapp": AckKind.PER_MESSAGE,
        "generic": AckKind.PER_MESSAGE,
        "twilio": AckKind.PER_MESSAGE,
        "messenger": AckKind.WATERMARK,
        "instagram": AckKind.SYNCHRONOUS,
        "telegram": AckKind.SYNCHRONOUS,
    }


async def test_messenger_posts_the_send_api_body_to_the_page_and_reads_the_message_id() -> None:
    request, result = await _exchange(
        MessengerAdapter,
        _message("messenger"),
        respond(200, b'{"recipient_id":"6543210","message_id":"m_AG5Hz2U"}'),
        messenger_page_id="1122334455",
        messenger_page_access_token="page-token",
    )
    assert _request_line(request) == "POST /v21.0/1122334455/messages HTTP/1.1"
    assert _header(request, "Authorization") == "Bearer page-token"
    assert orjson.loads(request.body) == {
        "recipient": {"id": "6543210"},
        "messaging_type": "RESPONSE",
        "message": {"text": "hello"},
    }
    assert isinstance(result, SendResult)
    assert result.platform_message_id == "m_AG5Hz2U"


async def test_messenger_without_a_page_id_sends_to_me_and_keeps_the_payload_s_own_message() -> None:
    message = _message("messenger", message={"attachment": {"type": "image"}}, messaging_type="UPDATE")
    request, _ = await _exchange(MessengerAdapter, message, respond(200, b'{"message_id":"m_1"}'))
    assert _request_line(request) == "POST /v21.0/me/messages HTTP/1.1"
    body = orjson.loads(request.body)
    assert body["message"] == {"attachment": {"type": "image"}}
    assert body["messaging_type"] == "UPDATE"


@pytest.mark.parametrize(("http", "code", "transient"), [(400, 613, True), (400, 1200, True), (400, 100, False)])
async def test_messenger_graph_throttling_codes_are_transient_whatever_the_http_status(
    http: int, code: int, transient: bool
) -> None:
    body = orjson.dumps({"error": {"message": "x", "type": "OAuthException", "code": code}})
    _, error = await _exchange(MessengerAdapter, _message("messenger"), respond(http, body))
    assert isinstance(error, TransientPlatformError if transient else PermanentPlatformError)


async def test_instagram_posts_to_its_own_host_and_account() -> None:
    request, result = await _exchange(
        InstagramAdapter,
        _message("instagram", account="17841400000000000"),
        respond(200, b'{"recipient_id":"6543210","message_id":"aWdfZAG1"}'),
        instagram_access_token="ig-token",
    )
    assert _request_line(request) == "POST /v21.0/17841400000000000/messages HTTP/1.1"
    assert _header(request, "Authorization") == "Bearer ig-token"
    assert orjson.loads(request.body)["recipient"] == {"id": "6543210"}
    assert isinstance(result, SendResult)
    assert result.platform_message_id == "aWdfZAG1"


async def test_twilio_posts_a_form_with_basic_auth_and_a_status_callback_carrying_the_room() -> None:
    request, result = await _exchange(
        TwilioAdapter,
        _message("twilio", recipient="+4917000001"),
        respond(201, b'{"sid":"SM0123456789abcdef0123456789abcdef","status":"queued"}'),
        partition=5,
        twilio_account_sid="AC00000000000000000000000000000001",
        twilio_auth_token="auth-token",
        twilio_from="+15005550006",
        twilio_status_callback_url="https://hooks.example.com/webhooks/twilio",
    )
    assert (
        _request_line(request) == "POST /2010-04-01/Accounts/AC00000000000000000000000000000001/Messages.json HTTP/1.1"
    )
    assert _header(request, "Content-Type") == "application/x-www-form-urlencoded"
    user, _, password = (
        base64.b64decode(_header(request, "Authorization").removeprefix("Basic ")).decode().partition(":")
    )
    assert (user, password) == ("AC00000000000000000000000000000001", "auth-token")
    form = {k: v[0] for k, v in parse_qs(request.body.decode(), keep_blank_values=True).items()}
    assert (form["To"], form["From"], form["Body"]) == ("+4917000001", "+15005550006", "hello")
    callback = urlsplit(form["StatusCallback"])
    assert (callback.scheme, callback.netloc, callback.path) == ("https", "hooks.example.com", "/webhooks/twilio")
    data = decode_callback_data(parse_qs(callback.query)[CALLBACK_PARAM][0])
    assert data is not None
    assert (data.room_id, data.message_id, data.partition) == ("room-7", "m-7", 5)
    assert isinstance(result, SendResult)
    assert result.platform_message_id == "SM0123456789abcdef0123456789abcdef"


async def test_twilio_with_a_messaging_service_sends_no_from() -> None:
    request, _ = await _exchange(
        TwilioAdapter,
        _message("twilio", text="plain"),
        respond(201, b'{"sid":"SM1"}'),
        twilio_account_sid="AC1",
        twilio_messaging_service_sid="MG1",
    )
    form = parse_qs(request.body.decode())
    assert form["MessagingServiceSid"] == ["MG1"]
    assert "From" not in form
    assert "StatusCallback" not in form  # none configured


async def test_twilio_429_is_transient_and_a_400_permanent() -> None:
    settings: dict[str, Any] = {"twilio_account_sid": "AC1", "twilio_from": "+1"}
    _, busy = await _exchange(
        TwilioAdapter, _message("twilio"), respond(429, b'{"code":20429,"status":429}', "Retry-After: 2"), **settings
    )
    assert isinstance(busy, TransientPlatformError)
    assert busy.retry_after == 2.0
    _, bad = await _exchange(
        TwilioAdapter, _message("twilio"), respond(400, b'{"code":21211,"status":400}'), **settings
    )
    assert isinstance(bad, PermanentPlatformError)


def test_twilio_without_a_sender_refuses_the_message() -> None:
    adapter = TwilioAdapter(PlatformSettings(twilio_account_sid="AC1"), 1, 1.0)
    with pytest.raises(PermanentPlatformError, match="FROM"):
        adapter.prepare(_message("twilio"))


async def test_telegram_posts_send_message_with_the_chat_id_and_names_the_message_by_chat() -> None:
    request, result = await _exchange(
        TelegramAdapter,
        _message("telegram", recipient="-1001234567890", text="hi", parse_mode="HTML"),
        respond(200, b'{"ok":true,"result":{"message_id":42,"date":1700000000,"chat":{"id":-1001234567890}}}'),
        telegram_bot_token="123456:ABC-DEF",
    )
    assert _request_line(request) == "POST /bot123456:ABC-DEF/sendMessage HTTP/1.1"
    assert orjson.loads(request.body) == {"chat_id": -1001234567890, "text": "hi", "parse_mode": "HTML"}
    assert isinstance(result, SendResult)
    assert result.platform_message_id == "-1001234567890:42"


@pytest.mark.parametrize(
    ("http", "body", "kind", "retry_after"),
    [
        (
            429,
            b'{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 34",'
            b'"parameters":{"retry_after":34}}',
            TransientPlatformError,
            34.0,
        ),
        (502, b"Bad Gateway", TransientPlatformError, None),
        (
            403,
            b'{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}',
            PermanentPlatformError,
            None,
        ),
        (
            400,
            b'{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}',
            PermanentPlatformError,
            None,
        ),
        (200, b'{"ok":false,"error_code":400,"description":"odd"}', PermanentPlatformError, None),
    ],
)
async def test_telegram_errors_follow_their_error_code(
    http: int, body: bytes, kind: type[Exception], retry_after: float | None
) -> None:
    _, error = await _exchange(TelegramAdapter, _message("telegram"), respond(http, body))
    assert isinstance(error, kind)
    if isinstance(error, TransientPlatformError):
        assert error.retry_after == retry_after


def test_a_message_without_text_is_refused_by_the_text_platforms() -> None:
    settings = PlatformSettings(twilio_account_sid="AC1", twilio_from="+1")
    for cls in (TelegramAdapter, TwilioAdapter, MessengerAdapter):
        with pytest.raises(PermanentPlatformError, match="no text"):
            cls(settings, 1, 1.0).prepare(_message(cls.name, image={"link": "x"}))


def test_a_watermark_covers_a_send_from_its_send_time_on() -> None:
    result = SendResult("m_1", sent_at_ms=1_000)
    assert watermark_covers(result, 1_000)
    assert watermark_covers(result, 1_003)  # the platform stamped it after the request left
    assert not watermark_covers(result, 999)  # the previous message's watermark: older than this send
    assert watermark_covers(result, 980, clock_skew_ms=20)
    assert not watermark_covers(SendResult("m_2"), 10**13)


@pytest.mark.parametrize("cls", [MessengerAdapter, InstagramAdapter, TelegramAdapter])
async def test_the_callback_header_is_sent_only_when_asked_for(cls: type[PlatformAdapter]) -> None:
    answer = respond(200, b'{"message_id":"m_1","ok":true,"result":{"message_id":1,"chat":{"id":1}}}')
    request, _ = await _exchange(cls, _message(cls.name), answer, partition=9, platform_callback_header=True)
    data = decode_callback_data(_header(request, CALLBACK_HEADER))
    assert data is not None
    assert (data.room_id, data.message_id, data.partition) == ("room-7", "m-7", 9)
    quiet, _ = await _exchange(cls, _message(cls.name), answer)
    with pytest.raises(AssertionError, match="no X-Inturn"):
        _header(quiet, CALLBACK_HEADER)
