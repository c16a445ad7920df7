"""The adapters' HTTP transport against a scripted local server: keep-alive, its pool and line, answer shapes,
and every way a connection can break."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import uvloop

from inturn.platforms.transport import HttpTransport, RequestWithdrawn
from inturn_devtools.waiting import eventually
from tests.platforms.wire import Answer, Conn, Platform, Request, chunked, held_back, respond, serve, stop

OK = respond(200, b'{"messages":[{"id":"wamid.1"}]}')


async def _ok(_request: Request, conn: Conn) -> bool:
    await conn.write(OK)
    return True


@asynccontextmanager
async def wired(answer: Answer, *, limit: int, timeout_s: float) -> AsyncIterator[tuple[Platform, HttpTransport]]:
    """A scripted platform answering with ``answer`` and a transport to it; the transport closed, then the platform
    stopped, when the block ends."""
    platform = await serve(answer)
    transport = HttpTransport(limit=limit, timeout_s=timeout_s)
    try:
        yield platform, transport
    finally:
        await transport.close()
        await stop(platform)


async def test_a_content_length_answer_and_a_chunked_one_arrive_whole() -> None:
    async def answer(request: Request, conn: Conn) -> bool:
        if request.body == b"chunked":
            await conn.write(chunked(200, b'{"a":', b' "b"', b"}"))
        else:
            await conn.write(respond(201, b"created", "Retry-After: 3"))
        return True

    async with wired(answer, limit=4, timeout_s=5) as (platform, transport):
        plain = await transport.request(platform.url + "/v1/messages?x=1", {"A": "b"}, b"plain")
        split = await transport.request(platform.url + "/v1/messages", {}, b"chunked")
    assert (plain.status, plain.body, plain.retry_after) == (201, b"created", "3")
    assert (split.status, split.body, split.retry_after) == (200, b'{"a": "b"}', None)
    head = platform.requests[0].head
    assert head.startswith(b"POST /v1/messages?x=1 HTTP/1.1\r\n")
    assert f"Host: {platform.url.removeprefix('http://')}\r\n".encode() in head
    assert b"A: b\r\n" in head
    assert b"Content-Length: 5\r\n" in head
    assert platform.accepted == 1  # both went over the one kept-alive connection


async def test_never_more_connections_than_the_limit_and_the_line_is_served_in_order() -> None:
    async with wired(_ok, limit=3, timeout_s=5) as (platform, transport):
        answers = await asyncio.gather(*(transport.request(platform.url, {}, b"%d" % i) for i in range(40)))
    assert all(a.status == 200 for a in answers)
    assert platform.most_open <= 3
    assert platform.accepted == 3
    # The first three went straight to the three new connections; the rest were written in the order asked.
    order = [int(r.body) for r in platform.requests]
    assert sorted(order[:3]) == [0, 1, 2]
    assert order[3:] == list(range(3, 40))


async def test_a_request_waiting_in_line_is_stamped_when_it_is_written_not_when_it_asked() -> None:
    async def slow(_request: Request, conn: Conn) -> bool:
        await asyncio.sleep(0.2)  # the platform's own processing time
        await conn.write(OK)
        return True

    # Each waits up to 0.6 s in line: not counted.
    async with wired(slow, limit=1, timeout_s=0.5) as (platform, transport):
        answers = await asyncio.gather(*(transport.request(platform.url, {}, b"x") for _ in range(4)))
    stamps = [a.sent_at_ms for a in answers]
    assert all(later - earlier >= 190 for earlier, later in itertools.pairwise(stamps))


async def test_a_cancelled_request_in_line_gives_its_place_to_the_next() -> None:
    release = asyncio.Event()
    async with wired(held_back(b"first", release, OK), limit=1, timeout_s=5) as (platform, transport):
        first = transport.request(platform.url, {}, b"first")
        dropped = transport.request(platform.url, {}, b"dropped")
        last = transport.request(platform.url, {}, b"last")
        dropped.cancel()
        release.set()
        await asyncio.gather(first, last)
    assert [r.body for r in platform.requests] == [b"first", b"last"]


async def test_a_request_whose_gate_closed_while_in_line_is_withdrawn_unwritten() -> None:
    release = asyncio.Event()
    owned = {"withdrawn": True, "kept": True}
    async with wired(held_back(b"first", release, OK), limit=1, timeout_s=5) as (platform, transport):
        first = transport.request(platform.url, {}, b"first")
        withdrawn = transport.request(platform.url, {}, b"withdrawn", gate=lambda: owned["withdrawn"])
        kept = transport.request(platform.url, {}, b"kept", gate=lambda: owned["kept"])
        owned["withdrawn"] = False  # e.g. its worker's partition was revoked while it waited
        release.set()
        await asyncio.gather(first, kept)
        with pytest.raises(RequestWithdrawn):
            await withdrawn
    assert [r.body for r in platform.requests] == [b"first", b"kept"]


async def test_a_request_whose_gate_closed_while_its_connection_opened_is_withdrawn_unwritten() -> None:
    owned = True
    async with wired(_ok, limit=2, timeout_s=5) as (platform, transport):
        withdrawn = transport.request(platform.url, {}, b"withdrawn", gate=lambda: owned)
        owned = False  # before the new connection is open: nothing has been written yet
        with pytest.raises(RequestWithdrawn):
            await withdrawn
        assert (await transport.request(platform.url, {}, b"next")).status == 200
    assert [r.body for r in platform.requests] == [b"next"]


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def close_after(_request: Request, conn: Conn) -> bool:
        await conn.write(OK)  # keep-alive by default, then the server drops it as idle
        return False

    async with wired(close_after, limit=2, timeout_s=5) as (platform, transport):
        await transport.request(platform.url, {}, b"one")
        await eventually(lambda: transport.connections == 0, 5, "every connection closed")
        second = await transport.request(platform.url, {}, b"two")
    assert second.status == 200
    assert [r.connection for r in platform.requests] == [0, 1]


async def test_connection_close_in_the_answer_ends_the_connection() -> None:
    async def close_said(_request: Request, conn: Conn) -> bool:
        await conn.write(respond(200, b"{}", "Connection: close"))
        return True  # the server would go on; the client must not

    async with wired(close_said, limit=1, timeout_s=5) as (platform, transport):
        for _ in range(3):
            assert (await transport.request(platform.url, {}, b"x")).status == 200
    assert [r.connection for r in platform.requests] == [0, 1, 2]


@pytest.mark.parametrize(
    ("break_it", "reason"),
    [
        ("reset", "connection closed before the answer"),
        ("half_answer", "connection closed before the answer"),
        ("garbage", "malformed HTTP answer"),
    ],
)
async def test_a_connection_broken_mid_request_fails_the_request_and_the_next_one_goes_through(
    break_it: str, reason: str
) -> None:
    async def answer(request: Request, conn: Conn) -> bool:
        if request.body == b"doomed":
            if break_it == "reset":
                conn.reset()
            elif break_it == "half_answer":
                await conn.write(OK[:30])
                conn.reset()
            else:
                await conn.write(b"HTTP/1.1 2xx nonsense\r\n\r\n")
            return False
        await conn.write(OK)
        return True

    async with wired(answer, limit=1, timeout_s=5) as (platform, transport):
        with pytest.raises(ConnectionError, match=reason):
            await transport.request(platform.url, {}, b"doomed")
        after = await transport.request(platform.url, {}, b"after")
    assert after.status == 200
    assert transport.connections == 0


async def test_an_answer_slower_than_the_timeout_fails_and_frees_the_connection() -> None:
    async def silent(request: Request, conn: Conn) -> bool:
        if request.body == b"slow":
            await asyncio.sleep(10)
        await conn.write(OK)
        return True

    async with wired(silent, limit=1, timeout_s=0.2) as (platform, transport):
        with pytest.raises(TimeoutError, match=r"no complete answer within 0\.2 s"):
            await transport.request(platform.url, {}, b"slow")
        after = await transport.request(platform.url, {}, b"after")
    assert after.status == 200
    assert [r.connection for r in platform.requests] == [0, 1]  # the late answer's connection was dropped


async def test_a_timeout_counts_from_its_own_request_not_the_connections_earlier_one() -> None:
    """One timer watches every request's deadline: when the deadline of an answered request comes, the next request
    on the same connection, written later, is not timed out with it; it gets its own full timeout."""

    async def answer(request: Request, conn: Conn) -> bool:
        if request.body == b"second":
            await asyncio.sleep(0.25)  # past the first request's deadline, within its own
        if request.body == b"silent":
            await asyncio.sleep(10)
        await conn.write(OK)
        return True

    async with wired(answer, limit=1, timeout_s=0.4) as (platform, transport):
        first = await transport.request(platform.url, {}, b"first")
        await asyncio.sleep(0.2)
        second = await transport.request(platform.url, {}, b"second")
        with pytest.raises(TimeoutError):
            await transport.request(platform.url, {}, b"silent")  # the timer still times out one past due
    assert (first.status, second.status) == (200, 200)
    assert platform.accepted == 1  # all three were written on the one kept-alive connection


async def test_a_refused_connection_fails_the_request_and_gives_its_place_back() -> None:
    platform = await serve(_ok)
    url = platform.url
    await stop(platform)
    transport = HttpTransport(limit=1, timeout_s=2)
    try:
        with pytest.raises(ConnectionError):
            await transport.request(url, {}, b"x")
        assert transport.connections == 0
    finally:
        await transport.close()


async def test_closing_fails_what_is_on_the_wire_and_in_line_and_whatever_comes_after() -> None:
    async def never(_request: Request, _conn: Conn) -> bool:
        await asyncio.sleep(10)
        return False

    platform = await serve(never)
    transport = HttpTransport(limit=1, timeout_s=30)
    try:
        on_wire = transport.request(platform.url, {}, b"a")
        in_line = transport.request(platform.url, {}, b"b")
        await eventually(lambda: len(platform.requests) == 1, 5, "the request at the platform")
        await transport.close()
        for future in (on_wire, in_line, transport.request(platform.url, {}, b"c")):
            with pytest.raises(ConnectionError):
                await future
    finally:
        await stop(platform)


def test_only_http_urls_are_sent() -> None:
    async def attempt() -> None:
        transport = HttpTransport(limit=1, timeout_s=1)
        with pytest.raises(ValueError, match="not an http"):
            transport.request("ftp://example.org/x", {}, b"")

    asyncio.run(attempt())


def test_under_uvloop_a_burst_of_new_connections_serves_every_request() -> None:
    """The worker runs on uvloop: a burst of new connections there carries every request. (Under heavy load
    uvloop was seen resuming the connecting code before ``connection_made``; this burst did not reproduce that
    ordering, which the transport handles by taking the connection as made when the connect returns.)"""

    async def burst() -> None:
        async with wired(_ok, limit=50, timeout_s=10) as (platform, transport):
            answers = await asyncio.gather(*(transport.request(platform.url, {}, b"%d" % i) for i in range(300)))
        assert [a.status for a in answers] == [200] * 300
        assert platform.accepted == 50

    uvloop.run(burst())
