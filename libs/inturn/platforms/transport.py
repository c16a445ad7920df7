"""The platform adapters' HTTP client: keep-alive HTTP/1.1 on asyncio protocols, parsed by httptools (llhttp).

Chosen by measurement (``benchmarks/bench_transport.py``): against the platform simulator at the worker's
concurrency it costs a fraction of aiohttp's client CPU per request, because a request is one write of
prepared bytes and a response a few parser callbacks, with no Task, no stream reader and no per-request
objects beyond a future and the answer. Every request's timeout is a deadline on one loop timer
(``inturn.deadlines``), not a timer each.

What it promises, each pinned by ``tests/platforms/test_transport.py``:

- at most ``limit`` connections at once (connecting or open) over all origins; requests beyond that wait in
  one first-come, first-served line, holding only their place (the body they will send is the caller's);
- keep-alive: a connection goes back to the pool after a complete response unless either side said
  ``Connection: close``; a connection the server closed while idle leaves the pool when the close arrives,
  so the next request opens a fresh one;
- ``https`` with certificate and host name verification (``ssl.create_default_context()`` unless a context
  is given, which honours ``SSL_CERT_FILE``);
- Content-Length and chunked responses (llhttp decodes them); an answer the server ends by closing the
  connection fails (llhttp cannot tell its end from a break);
- ``timeout_s`` bounds connecting, and separately the request on the wire (from its write to the last byte
  of the answer); the wait for a pooled connection is not counted;
- a connection lost or a malformed answer fails the request with ``ConnectionError``, a timeout with
  ``TimeoutError``: never a silent drop. A request whose connection broke is not re-sent here: whether the
  platform acted on it is unknown, and retrying is the caller's decision.

``request`` returns a future, so a caller can attach a callback instead of awaiting (no Task per request);
``PlatformAdapter.send`` is the coroutine over it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools

from inturn.deadlines import Deadline, Deadlines
from inturn.schemas import now_ms

MAX_BODY = 1 << 20  # an answer larger than this is refused: a send endpoint answers with a few hundred bytes
_ORIGINS_CACHED = 4096  # parsed URLs kept (one per platform account); the cache starts over beyond it

Origin = tuple[str, str, int]  # scheme, host, port


@dataclass(slots=True)
class Response:
    """A complete HTTP answer: status, body, the Retry-After header, and when the request was written."""

    status: int
    body: bytes
    retry_after: str | None
    sent_at_ms: int


class RequestWithdrawn(Exception):
    """A request in line whose gate closed before its turn: it was never written."""


@dataclass(slots=True, eq=False)
class _Request:
    """A request and its answer's future: references to what the caller holds, nothing rendered yet (thousands
    wait in line at once)."""

    origin: Origin
    url: str
    headers: dict[str, str]
    body: bytes
    future: asyncio.Future[Response]
    gate: Callable[[], bool] | None

    def withdrawn(self) -> bool:
        """Whether the request is no longer wanted, so never to be written: its caller cancelled it, or its gate
        closed (it then fails with ``RequestWithdrawn``)."""
        if self.future.done():
            return True
        if self.gate is not None and not self.gate():
            self.future.set_exception(RequestWithdrawn("withdrawn in line: its gate closed before its turn"))
            return True
        return False


class HttpTransport:
    """Keep-alive HTTP/1.1 connections to the origins of one platform, ``limit`` at most."""

    def __init__(self, limit: int, timeout_s: float, ssl_context: ssl.SSLContext | None = None) -> None:
        if limit < 1:
            raise ValueError(f"a transport needs at least one connection, not {limit}")
        self.limit = limit
        self._timeout_s = timeout_s
        self._ssl = ssl_context
        self._idle: dict[Origin, list[_Connection]] = {}
        self._line: deque[_Request] = deque()
        self._open = 0  # connections open or being opened
        self._live: set[_Connection] = set()  # open ones, idle or busy
        self._targets: dict[str, tuple[Origin, bytes]] = {}
        self._heads: dict[int, tuple[dict[str, str], bytes]] = {}
        self._deadlines = Deadlines()  # one per request on the wire (``watch``)
        self._closed = False

    @property
    def timeout_s(self) -> float:
        """How long a request may take on the wire (and, separately, connecting); fixed for the transport's life."""
        return self._timeout_s

    @property
    def connections(self) -> int:
        """Connections open or being opened."""
        return self._open

    @property
    def idle(self) -> int:
        """Open connections waiting in the pool for a request."""
        return sum(len(c) for c in self._idle.values())

    @property
    def waiting(self) -> int:
        """Requests in line for a connection (cancelled ones included until their turn comes)."""
        return len(self._line)

    def request(
        self, url: str, headers: dict[str, str], body: bytes, gate: Callable[[], bool] | None = None
    ) -> asyncio.Future[Response]:
        """POST ``body`` to ``url``: a future of the answer (any status), or of ``ConnectionError`` /
        ``TimeoutError``. Cancelling the future abandons the request (a written one still reads its answer,
        so the connection stays usable). ``gate``: asked when a request that waited (in line, or for a new
        connection to open) is about to be written; false, and it is not written but fails with
        ``RequestWithdrawn`` (a worker's partition taken away while its send waited for a connection: written
        seconds later, it could be sent again by the partition's next owner)."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Response] = loop.create_future()
        if self._closed:
            answer.set_exception(ConnectionError("the transport is closed"))
            return answer
        origin = self._target(url)[0]
        request = _Request(origin, url, headers, body, answer, gate)
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if connection.usable:
                connection.send(request)
                return answer
        if self._open < self.limit:
            self._connect(request)
        else:
            self._line.append(request)
        return answer

    def _target(self, url: str) -> tuple[Origin, bytes]:
        """The origin of ``url`` and its request line with the Host header (parsed once per URL)."""
        target = self._targets.get(url)
        if target is None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"not an http(s) URL: {url!r}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
            if len(self._targets) >= _ORIGINS_CACHED:
                self._targets.clear()
            start = f"POST {path} HTTP/1.1\r\nHost: {host}\r\n".encode()
            target = self._targets[url] = ((parts.scheme, parts.hostname, port), start)
        return target

    def head(self, request: _Request) -> bytes:
        """The request's head, rendered when it is written."""
        headers = request.headers
        # The header lines of a dict are rendered once while the dict lives (adapters share one per platform).
        cached = self._heads.get(id(headers))
        if cached is None or cached[0] is not headers:
            lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1")
            if len(self._heads) >= _ORIGINS_CACHED:
                self._heads.clear()
            cached = self._heads[id(headers)] = (headers, lines)
        return b"%s%sContent-Length: %d\r\n\r\n" % (self._target(request.url)[1], cached[1], len(request.body))

    def _connect(self, request: _Request) -> None:
        self._open += 1
        asyncio.get_running_loop().create_task(self._open_for(request))

    async def _open_for(self, request: _Request) -> None:
        scheme, host, port = request.origin
        loop = asyncio.get_running_loop()
        if scheme == "https" and self._ssl is None:
            self._ssl = ssl.create_default_context()  # verifies the chain and the host name
        context = self._ssl if scheme == "https" else None
        try:
            transport, connection = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(self, request.origin),
                    host,
                    port,
                    ssl=context,
                    server_hostname=host if context else None,
                ),
                self.timeout_s,
            )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            self._open -= 1
            if not request.future.done():
                failure = TimeoutError("connect timed out") if isinstance(exc, TimeoutError) else exc
                if not isinstance(failure, TimeoutError | ConnectionError):
                    failure = ConnectionError(f"connect failed: {exc.__class__.__name__}: {exc}")
                request.future.set_exception(failure)
            self._next_in_line()
            return
        if connection.lost:  # closed before this task resumed; lost() has given its place back
            if not request.future.done():
                request.future.set_exception(ConnectionError("connection closed as soon as it opened"))
            return
        # uvloop may resume this task before it calls connection_made: the connection is usable from here on.
        connection.connection_made(transport)
        self._live.add(connection)
        if self._closed or request.withdrawn():  # abandoned while connecting: the connection serves the line
            self.release(connection)
        else:
            connection.send(request)

    def watch(self, connection: _Connection) -> Deadline:
        """Start the timeout of the request ``connection`` just wrote; the connection cancels it when the request
        ends (answered, failed, closed). The deadline holds the connection, not the request: no body is kept alive
        by it."""
        return self._deadlines.add(self._timeout_s, _Connection.timed_out, connection)

    def unwatch(self, deadline: Deadline | None) -> None:
        """The request ``deadline`` was for has ended."""
        self._deadlines.cancel(deadline)

    def release(self, connection: _Connection) -> None:
        """A connection finished an answer and may be reused: it serves the line, or waits in the pool."""
        line = self._line
        while line:
            request = line.popleft()
            if request.withdrawn():
                continue
            if request.origin == connection.origin:
                connection.send(request)
            else:  # the head of the line wants another origin: this connection makes room for one
                connection.close()
                self._connect(request)
            return
        if self._closed:
            connection.close()
        else:
            self._idle.setdefault(connection.origin, []).append(connection)

    def lost(self, connection: _Connection) -> None:
        """A connection closed (either side): it leaves the pool and its place goes to the line."""
        self._open -= 1
        self._live.discard(connection)
        idle = self._idle.get(connection.origin)
        if idle and connection in idle:
            idle.remove(connection)
        self._next_in_line()

    def _next_in_line(self) -> None:
        line = self._line
        while line and self._open < self.limit:
            request = line.popleft()
            if not request.withdrawn():
                self._connect(request)

    async def close(self) -> None:
        """Fail the requests in line, close every connection; later requests fail at once."""
        self._closed = True
        while self._line:
            request = self._line.popleft()
            if not request.future.done():
                request.future.set_exception(ConnectionError("the transport closed"))
        for connection in list(self._live):
            connection.close()  # a request on the wire fails with ConnectionError
        self._idle.clear()
        self._deadlines.close()
        await asyncio.sleep(0)  # let the transports run their close callbacks


class _Connection(asyncio.Protocol):
    """One keep-alive connection: at most one request at a time, its answer parsed by llhttp."""

    def __init__(self, owner: HttpTransport, origin: Origin) -> None:
        self.owner = owner
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.request: _Request | None = None
        self.deadline: Deadline | None = None  # the timeout of the request on the wire (``HttpTransport.watch``)
        self.sent_at_ms = 0
        self.chunks: list[bytes] = []
        self.size = 0
        self.retry_after: str | None = None
        self.complete = False
        self.keep_alive = False
        self.usable = False
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.transport is None and not self.lost:
            self.transport = cast(asyncio.Transport, transport)  # uvloop's TCP transport is not a subclass
            self.usable = True

    def send(self, request: _Request) -> None:
        """Write ``request`` and start its timeout."""
        assert self.transport is not None
        self.request = request
        self.chunks = []
        self.size = 0
        self.retry_after = None
        self.complete = False
        self.sent_at_ms = now_ms()  # the services' one wall clock (a test clock offset included)
        self.transport.writelines((self.owner.head(request), request.body))
        self.deadline = self.owner.watch(self)

    def data_received(self, data: bytes) -> None:
        if self.request is None:  # bytes nobody asked for: the connection is out of step
            self._fail(ConnectionError("unsolicited data from the server"))
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(f"malformed HTTP answer: {exc}"))
            return
        if self.complete:
            self._finish()

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 11 and name.lower() == b"retry-after":
            self.retry_after = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.size += len(body)
        if self.size > MAX_BODY:
            raise ConnectionError(f"answer larger than {MAX_BODY} bytes")
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()  # read now: llhttp resets it for the next answer

    def _finish(self) -> None:
        request = self.request
        assert request is not None
        self.request = None
        self.owner.unwatch(self.deadline)
        self.deadline = None
        body = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        if not request.future.done():
            request.future.set_result(Response(self.parser.get_status_code(), body, self.retry_after, self.sent_at_ms))
        if self.keep_alive and self.usable:
            self.owner.release(self)
        else:
            self.close()

    def timed_out(self) -> None:
        """The request on the wire got no complete answer in time (called by its deadline)."""
        self.deadline = None
        if self.request is not None:
            self._fail(TimeoutError(f"no complete answer within {self.owner.timeout_s:g} s"))

    def _fail(self, exc: Exception) -> None:
        request, self.request = self.request, None
        self.owner.unwatch(self.deadline)
        self.deadline = None
        if request is not None and not request.future.done():
            request.future.set_exception(exc)
        self.close()

    def close(self) -> None:
        """Close the connection (its loss is reported to the owner once)."""
        self.usable = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.usable = False
        if self.request is not None:
            reason = f": {exc.__class__.__name__}: {exc}" if exc else ""
            self._fail(ConnectionError(f"connection closed before the answer was complete{reason}"))
        self.owner.lost(self)
