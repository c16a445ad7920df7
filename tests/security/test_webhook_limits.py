"""The webhook against a hostile client: ``inturn webhook`` in a process of its own on real Kafka, sent exactly the
bytes a hostile client would send over loopback, and what it answers (docs/webhook.md, "Limits").

The timeouts are shortened here (headers 2 s, body 3 s, keep-alive 2 s) so that each case waits seconds, not the
defaults' tens of seconds; the size limits and the body budget are the defaults.
"""

from __future__ import annotations

import base64
import hashlib
import select
import time
from collections.abc import Callable

import httpx
import orjson
import pytest
from confluent_kafka.admin import AdminClient

from inturn import dead_letters, schemas
from inturn.settings import KafkaSettings
from inturn_devtools.waiting import wait_until
from inturn_webhook.signature import sign

from ..webhook.support import meta_payload, meta_status, read_topic
from .conftest import WEBHOOK_APP_SECRET, RawConnection, ServiceProcess, metric, status_of

pytestmark = pytest.mark.kafka

HEADER_TIMEOUT, BODY_TIMEOUT, KEEPALIVE = 2.0, 3.0, 2
SLACK = 1.5  # seconds a close may come after its deadline on a loaded machine (timers and scheduling)
SHORT = {
    "INTURN_WEBHOOK_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT),
    "INTURN_WEBHOOK_BODY_TIMEOUT_S": str(BODY_TIMEOUT),
    "INTURN_WEBHOOK_KEEPALIVE_TIMEOUT_S": str(KEEPALIVE),
}
MAX_HEADER_BYTES, MAX_HEADERS, BUDGET = 16 * 1024, 100, 32 * 1024 * 1024  # the defaults
FORGED = "sha256=" + "ab" * 32  # the right form, the wrong signature
Start = Callable[..., tuple[ServiceProcess, int, int]]


def _head(path: str, headers: dict[str, str], method: str = "POST") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: hooks.example.com", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _page(internal: int) -> str:
    return httpx.get(f"http://127.0.0.1:{internal}/metrics", timeout=10).text


def _server_refusals(internal: int, outcome: str) -> float:
    return metric(_page(internal), "inturn_webhook_requests_total", endpoint="server", outcome=outcome)


def test_headers_too_large_too_many_or_too_slow_are_refused_and_closed(webhook_process: Start) -> None:
    service, port, internal = webhook_process(**SHORT)

    # Just past the size limit, headers unfinished: 431 as soon as the limit is passed, then closed.
    over = RawConnection(port)
    assert over.send(b"POST /webhooks/whatsapp HTTP/1.1\r\nX-Big: " + b"a" * (MAX_HEADER_BYTES + 100))
    answer, closed = over.read_until_closed(5)
    assert status_of(answer) == 431
    assert b"request headers too large" in answer
    assert closed is not None

    # A 4 MB header: cut off long before it is all sent (the server closes; the sender's writes fail).
    huge = RawConnection(port)
    sent = huge.send(b"POST /webhooks/whatsapp HTTP/1.1\r\nX-Huge: " + b"h" * (4 * 1024 * 1024))
    answer, closed = huge.read_until_closed(5)
    assert closed is not None
    assert not sent or status_of(answer) == 431, answer[:100]

    # 101 small headers (well within the size): too many.
    many = RawConnection(port)
    assert many.send(_head("/webhooks/whatsapp", {f"X-H{i}": "1" for i in range(MAX_HEADERS + 1)}))
    answer, closed = many.read_until_closed(5)
    assert status_of(answer) == 431
    assert b"too many request headers" in answer
    assert closed is not None

    # 20,000 headers: refused the same way (by count, or by size first).
    flood = RawConnection(port)
    flood.send(_head("/webhooks/whatsapp", {f"X-F{i}": "1" for i in range(20_000)}))
    answer, closed = flood.read_until_closed(5)
    assert closed is not None
    assert status_of(answer) in (0, 431)

    # 50 connections with half-sent headers: each answered 408 and closed once the header timeout passed.
    half = [RawConnection(port) for _ in range(50)]
    for connection in half:
        assert connection.send(b"POST /webhooks/whatsapp HTTP/1.1\r\nHost: x\r\nX-Hub-Signa")
    for connection in half:
        answer, closed = connection.read_until_closed(HEADER_TIMEOUT + SLACK + 5)
        assert status_of(answer) == 408, answer
        assert closed is not None
        assert HEADER_TIMEOUT - 0.1 <= closed <= HEADER_TIMEOUT + SLACK, closed

    # A connection that sends nothing at all is not kept either.
    silent = RawConnection(port)
    answer, closed = silent.read_until_closed(HEADER_TIMEOUT + SLACK + 5)
    assert closed is not None
    assert closed <= HEADER_TIMEOUT + SLACK, closed

    assert _server_refusals(internal, "headers_too_large") >= 1
    assert _server_refusals(internal, "too_many_headers") >= 1
    assert _server_refusals(internal, "header_timeout") >= 51
    assert service.proc.poll() is None


def test_stalled_bodies_and_idle_keepalive_connections_are_closed_on_time(webhook_process: Start) -> None:
    _, port, internal = webhook_process(**SHORT)
    stalled = []
    for _ in range(20):
        connection = RawConnection(port)
        assert connection.send(_head("/webhooks/whatsapp", {"X-Hub-Signature-256": FORGED, "Content-Length": "1000"}))
        assert connection.send(b'{"object":')  # then nothing more
        stalled.append(connection)
    for connection in stalled:
        answer, closed = connection.read_until_closed(BODY_TIMEOUT + SLACK + 5)
        assert answer == b"", answer  # nobody to answer: the connection is closed
        assert closed is not None
        assert BODY_TIMEOUT - 0.1 <= closed <= BODY_TIMEOUT + SLACK, closed

    # Keep-alive: a request answered, then the connection idles until the keep-alive timeout closes it.
    idle = RawConnection(port)
    assert idle.send(_head("/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=no&hub.challenge=1", {}, "GET"))
    assert status_of(idle.read_response()) == 403
    answered = time.monotonic()
    answer, closed = idle.read_until_closed(KEEPALIVE + SLACK + 5)
    assert answer == b""
    assert closed is not None
    assert KEEPALIVE - 0.1 <= time.monotonic() - answered <= KEEPALIVE + SLACK
    assert _server_refusals(internal, "body_timeout") >= 20


def test_a_body_is_read_only_under_a_signature_of_the_right_form_and_within_the_budget(
    webhook_process: Start,
) -> None:
    _, port, internal = webhook_process(**SHORT)
    size = 1_000_000
    # Unsigned, or only a "sha256=" prefix: 401 from the headers alone, not one byte of the body sent.
    for headers in ({}, {"X-Hub-Signature-256": "sha256="}, {"X-Hub-Signature-256": "sha256=" + "g" * 64}):
        connection = RawConnection(port)
        assert connection.send(_head("/webhooks/whatsapp", {**headers, "Content-Length": str(size)}))
        answer, closed = connection.read_until_closed(5)
        assert status_of(answer) == 401, answer
        assert b"connection: close" in answer.lower()
        assert closed is not None
    # A Twilio route wants Twilio's form (Base64 of 20 bytes), not Meta's.
    twilio = RawConnection(port)
    assert twilio.send(_head("/webhooks/twilio", {"X-Twilio-Signature": FORGED, "Content-Length": str(size)}))
    assert status_of(twilio.read_until_closed(5)[0]) == 401
    # Too large by its Content-Length: 413 before the body.
    large = RawConnection(port)
    assert large.send(_head("/webhooks/whatsapp", {"X-Hub-Signature-256": FORGED, "Content-Length": "2000000"}))
    assert status_of(large.read_until_closed(5)[0]) == 413
    # A body on a route that takes none (the handshake, an unknown path): 413 before it is read.
    for path in ("/webhooks/whatsapp?hub.mode=subscribe", "/anything"):
        other = RawConnection(port)
        assert other.send(_head(path, {"Content-Length": str(size)}, "GET"))
        assert status_of(other.read_until_closed(5)[0]) == 413

    # The right form: the body is read (the signature checked over it: 401 "does not match" comes after it).
    body = b"x" * size
    right_form = RawConnection(port)
    assert right_form.send(_head("/webhooks/whatsapp", {"X-Hub-Signature-256": FORGED, "Content-Length": str(size)}))
    assert right_form.send(body)
    answer = right_form.read_response()
    assert status_of(answer) == 401
    assert b"signature does not match" in answer

    # The budget: right-form requests announcing 1 MB each, their bodies not sent, hold their reservations; once
    # the budget is taken the next ones get 503 with Retry-After, from the headers alone.
    holders, refused = [], []
    for _ in range(BUDGET // size + 3):
        connection = RawConnection(port)
        head = _head("/webhooks/whatsapp", {"X-Hub-Signature-256": FORGED, "Content-Length": str(size)})
        assert connection.send(head)
        holders.append(connection)
    # The refused are answered at once; the admitted wait for their body (until the 3 s body timeout).
    waiting = {connection.sock: connection for connection in holders}
    expected = len(holders) - BUDGET // size

    def answered() -> bool:
        readable, _, _ = select.select(list(waiting), [], [], 0.05)
        for sock in readable:
            del waiting[sock]
            refused.append(sock.recv(4096))
        return len(refused) >= expected

    wait_until(answered, 2, f"{expected} requests refused for the budget")
    assert select.select(list(waiting), [], [], 0.3)[0] == []  # and no more than those
    assert len(refused) == len(holders) - BUDGET // size, [a[:40] for a in refused]
    assert all(status_of(a) == 503 and b"retry-after: 1" in a.lower() for a in refused), refused[:1]
    assert _server_refusals(internal, "over_budget") == len(refused)
    for connection in holders:
        connection.close()

    # Given back when they are gone: a signed callback is read and served again.
    def served() -> bool:
        payload = orjson.dumps(meta_payload(meta_status("wamid.after", "read", room="room-b", message="m-b")))
        answer = httpx.post(
            f"http://127.0.0.1:{port}/webhooks/whatsapp",
            content=payload,
            headers={"X-Hub-Signature-256": sign(payload, WEBHOOK_APP_SECRET.encode())},
            timeout=10,
        )
        return answer.status_code == 200

    wait_until(served, 10, "a signed callback served once the budget was given back", every=0.2)


def _topic_max_message_bytes(settings: KafkaSettings) -> int:
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    limit = dead_letters.topic_max_message_bytes(admin, settings.topic_dlq)
    assert limit is not None
    return limit


def test_a_signed_unparseable_900_kb_callback_is_answered_200_with_one_bounded_dead_letter(
    webhook_process: Start, inturn_topics: KafkaSettings
) -> None:
    _, port, _ = webhook_process(**SHORT)
    big = b"{" + b"n" * (900_000 - 1)  # signed, within the 1 MiB body limit, not JSON
    small = b"not json " * 1000  # 9 KB: kept whole
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        answers = [
            client.post(
                "/webhooks/whatsapp",
                content=body,
                headers={"X-Hub-Signature-256": sign(body, WEBHOOK_APP_SECRET.encode())},
            )
            for body in (big, small)
        ]
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert [a.json()["dead_lettered"] for a in answers] == [1, 1]

    records = read_topic(inturn_topics, inturn_topics.topic_dlq, 2)
    topic_limit = _topic_max_message_bytes(inturn_topics)
    assert all(len(value) < topic_limit for _, _, value in records), [len(v) for _, _, v in records]
    letters = [schemas.decode(schemas.DeadLetter, value) for _, _, value in records]
    bounded = next(letter for letter in letters if letter.truncated)
    whole = next(letter for letter in letters if not letter.truncated)
    assert (bounded.raw_size, bounded.raw_sha256) == (len(big), hashlib.sha256(big).hexdigest())
    assert bounded.raw() == big[: dead_letters.HEAD_BYTES]
    assert "too large for the dead-letter topic" in bounded.reason
    assert base64.b64decode(whole.raw_b64) == small
    assert whole.raw_size is None
    # Exactly these two: nothing produced again (a platform retrying would have meant a third).
    assert len(read_topic(inturn_topics, inturn_topics.topic_dlq, 2, timeout=3)) == 2


def test_probes_metrics_and_documents_are_served_only_on_the_internal_port(webhook_process: Start) -> None:
    _, port, internal = webhook_process()
    for path in ("/metrics", "/healthz", "/readyz", "/openapi.json", "/docs", "/redoc"):
        assert httpx.get(f"http://127.0.0.1:{port}{path}", timeout=10).status_code == 404, path
        assert httpx.get(f"http://127.0.0.1:{internal}{path}", timeout=10).status_code == 200, path
    assert httpx.post(f"http://127.0.0.1:{internal}/webhooks/whatsapp", timeout=10).status_code == 404
