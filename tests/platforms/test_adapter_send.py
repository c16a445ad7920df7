"""``PlatformAdapter.send`` over the transport: what each platform answer, and each broken connection, becomes
for the worker (a result, a ``TransientPlatformError`` it retries, or a ``PermanentPlatformError`` it
dead-letters), over plain HTTP and over TLS verified against a local certificate authority."""

from __future__ import annotations

from pathlib import Path

import pytest

from inturn.errors import PermanentPlatformError, TransientPlatformError
from inturn.platforms import GenericAdapter, WhatsAppAdapter
from inturn.schemas import Message, now_ms
from inturn.settings.worker import PlatformSettings
from tests.platforms.wire import Answer, Conn, Request, certificate_authority, chunked, respond, serve, stop
from tests.support.messages import text_message


def _message(n: int = 1, platform: str = "whatsapp") -> Message:
    return text_message(
        f"room-{n}", f"m-{n}", platform=platform, account="100200300", recipient=f"4917{n:04d}", body="hello"
    )


def _scripted(answer: bytes) -> tuple[list[bytes], Answer]:
    sent: list[bytes] = []

    async def handler(request: Request, conn: Conn) -> bool:
        sent.append(request.body)
        await conn.write(answer)
        return True

    return sent, handler


async def _send_once(answer: bytes, platform: str = "whatsapp") -> object:
    """Send one message to a server giving ``answer``: the result or the raised error."""
    _, handler = _scripted(answer)
    server = await serve(handler)
    settings = PlatformSettings(whatsapp_base_url=server.url, generic_base_url=server.url)
    adapter = (WhatsAppAdapter if platform == "whatsapp" else GenericAdapter)(settings, 4, 2.0)
    try:
        return await adapter.send(adapter.prepare(_message(platform=platform)))
    except (TransientPlatformError, PermanentPlatformError) as exc:
        return exc
    finally:
        await adapter.close()
        await stop(server)


async def test_an_accepted_message_gives_the_platform_id_and_when_it_left() -> None:
    before = now_ms()
    result = await _send_once(chunked(200, b'{"messages":[{"id":', b'"wamid.XYZ"}]}'))
    assert getattr(result, "platform_message_id", None) == "wamid.XYZ"
    assert before <= (getattr(result, "sent_at_ms", 0) or 0) <= now_ms()


async def test_429_carries_its_retry_after_and_is_transient() -> None:
    error = await _send_once(respond(429, b'{"error":{"code":4}}', "Retry-After: 7"))
    assert isinstance(error, TransientPlatformError)
    assert (error.status, error.retry_after) == (429, 7.0)


async def test_a_5xx_is_transient_and_a_4xx_permanent_each_with_the_platform_s_words() -> None:
    busy = await _send_once(respond(503, b"upstream busy"), platform="generic")
    assert isinstance(busy, TransientPlatformError)
    assert (busy.status, busy.retry_after) == (503, None)
    assert "upstream busy" in busy.reason
    bad = await _send_once(respond(400, b'{"error":{"code":100,"message":"Invalid parameter"}}'))
    assert isinstance(bad, PermanentPlatformError)
    assert bad.status == 400
    assert "Invalid parameter" in bad.reason


async def test_a_2xx_without_a_message_id_is_permanent() -> None:
    error = await _send_once(respond(200, b'{"unexpected": true}'))
    assert isinstance(error, PermanentPlatformError)
    assert "unexpected 2xx body" in error.reason


async def test_a_connection_reset_mid_request_is_transient_so_the_worker_retries_it() -> None:
    async def reset(_request: Request, conn: Conn) -> bool:
        conn.reset()
        return False

    server = await serve(reset)
    adapter = WhatsAppAdapter(PlatformSettings(whatsapp_base_url=server.url), 4, 2.0)
    try:
        with pytest.raises(TransientPlatformError, match="connection error") as caught:
            await adapter.send(adapter.prepare(_message()))
    finally:
        await adapter.close()
        await stop(server)
    assert caught.value.status is None
    assert len(server.requests) == 1  # it reached the platform once: the retry is the worker's decision


async def test_tls_is_verified_against_the_trusted_authorities(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over https the adapter sends when the server's certificate chains to a trusted CA (here one made for the
    test, trusted through SSL_CERT_FILE), and refuses the same server when that CA is not trusted."""
    ca, server_tls = certificate_authority(tmp_path)
    sent, handler = _scripted(respond(200, b'{"messages":[{"id":"wamid.tls"}]}'))
    server = await serve(handler, tls=server_tls)
    assert server.url.startswith("https://")
    settings = PlatformSettings(whatsapp_base_url=server.url)
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "no-such-bundle.pem"))
        untrusting = WhatsAppAdapter(settings, 2, 2.0)
        try:
            with pytest.raises(TransientPlatformError, match="CERTIFICATE_VERIFY_FAILED"):
                await untrusting.send(untrusting.prepare(_message(1)))
        finally:
            await untrusting.close()
        monkeypatch.setenv("SSL_CERT_FILE", str(ca))
        trusting = WhatsAppAdapter(settings, 2, 2.0)
        try:
            result = await trusting.send(trusting.prepare(_message(2)))
        finally:
            await trusting.close()
    finally:
        await stop(server)
    assert result.platform_message_id == "wamid.tls"
    assert len(sent) == 1
    assert b'"to":"49170002"' in sent[0]
