"""What a stranger can make the webhook spend: uvicorn's HTTP protocol (llhttp through httptools) with limits.

uvicorn bounds none of these by itself: the size and number of headers, how long a client may take to send its
headers or its body, or how many bodies are held at once. ``GuardedProtocol`` (``uvicorn.run(http=...)``) adds,
per connection:

- the request line plus headers at most ``max_header_bytes``, at most ``max_headers`` fields: else 431 and the
  connection is closed (counted as they arrive, so an endless header is cut off at the limit, not buffered);
- headers complete within ``header_timeout`` of the connection's start or of the request's first byte: else 408
  and closed (a half-sent request holds nothing for long);
- the whole body within ``body_timeout`` of the headers: else closed (the application sees the client gone);
- an idle keep-alive connection closed after uvicorn's ``timeout_keep_alive`` (set from the settings);
- before a single byte of body is buffered, ``Guard.admit`` decides (``inturn_webhook.admission``): a callback
  route whose signature header has the route's form reserves its declared length from the process-wide
  ``Budget`` (503 with ``Retry-After`` when it does not fit); anything else with a body is refused (401 or 413).
  A refused request is answered at once with ``Connection: close`` and its body is never read. The reservation is
  given back when the application is done with the request.

Memory given back: glibc keeps freed heap memory for reuse, and raises its mmap threshold after large blocks are
freed, so the 1 MiB bodies of a flood would stay in the process's RSS. ``release_memory_after_bodies`` fixes the
mmap threshold (``mallopt(M_MMAP_THRESHOLD)``: a body of 128 KiB or more is its own mapping, unmapped when freed)
and ``HeapKeeper`` trims the heap (``malloc_trim``) shortly after connections end, at most every 2 seconds.
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import ctypes.util
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httptools
import structlog
from uvicorn.protocols.http.httptools_impl import STATUS_LINE as _STATUS_LINE
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from inturn.metrics import webhook as metrics

log = structlog.get_logger("inturn.webhook")

#: glibc's ``mallopt`` parameter numbers (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: Blocks of this size or more are mapped on their own and unmapped when freed (glibc's default start value, fixed).
MMAP_THRESHOLD = 128 * 1024
#: How long after a connection ended the heap is trimmed, and how often at most (a trim of a heap of a hundred MiB
#: takes about 40 ms of the event loop, measured; of a quiet one, about 1 ms).
TRIM_DELAY_S = 0.5
TRIM_EVERY_S = 2.0


def _libc() -> Any:
    """glibc, or None (another C library: the memory tuning is skipped)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.malloc_trim  # noqa: B018 - only glibc has it
        libc.mallopt  # noqa: B018 - only glibc has it
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def release_memory_after_bodies() -> bool:
    """Fix glibc's mmap threshold (large bodies are unmapped when freed, whatever was freed before): True when
    done (glibc), False otherwise."""
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def trim_heap() -> None:
    """Give the heap's free memory back to the operating system (glibc ``malloc_trim``; nothing elsewhere)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class HeapKeeper:
    """Trims the heap (``malloc_trim``) shortly after connections end, at most once per ``TRIM_EVERY_S``: what a
    flood's reads left behind goes back to the operating system, whatever the flood was refused for."""

    def __init__(self) -> None:
        self._due: asyncio.TimerHandle | None = None
        self._last = 0.0  # loop time of the last trim

    def soon(self) -> None:
        """Something was freed (a connection closed, a body dropped): trim within a few seconds."""
        if self._due is not None or _LIBC is None:
            return
        loop = asyncio.get_running_loop()
        delay = max(TRIM_DELAY_S, self._last + TRIM_EVERY_S - loop.time())
        self._due = loop.call_later(delay, self._trim, loop)

    def _trim(self, loop: asyncio.AbstractEventLoop) -> None:
        self._due = None
        self._last = loop.time()
        trim_heap()


class Budget:
    """Bytes of request bodies the process holds at once, across every connection."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held = 0

    def take(self, size: int) -> bool:
        """Reserve ``size`` bytes: False (nothing reserved) when they do not fit."""
        if self.held + size > self.capacity:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Give back a reservation."""
        self.held -= size


@dataclass(frozen=True, slots=True)
class Refusal:
    """An answer given by the server itself, the connection then closed."""

    status: int
    detail: str
    outcome: str  # inturn_webhook_requests_total's answer label
    retry_after: bool = False

    def response(self) -> bytes:
        body = b'{"detail":"%s"}' % self.detail.encode()
        retry = b"retry-after: 1\r\n" if self.retry_after else b""
        return b"".join(
            (
                _STATUS_LINE[self.status],
                b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body),
                retry,
                b"connection: close\r\n\r\n",
                body,
            )
        )


#: Decides, once a request's headers are in, before its body is read: the bytes to reserve, or a refusal.
#: Arguments: whether it came to the internal port, the method, the raw path, the headers (lower-case names).
Admit = Callable[[bool, bytes, bytes, list[tuple[bytes, bytes]]], "int | Refusal"]


@dataclass(frozen=True, slots=True)
class Guard:
    """The limits ``GuardedProtocol`` enforces, the admission rule and the budget (one per process)."""

    max_header_bytes: int
    max_headers: int
    header_timeout: float
    body_timeout: float
    internal_port: int
    admit: Admit
    budget: Budget
    heap: HeapKeeper


HEADERS_TOO_LARGE = Refusal(431, "request headers too large", "headers_too_large")
TOO_MANY_HEADERS = Refusal(431, "too many request headers", "too_many_headers")
HEADER_TIMEOUT = Refusal(408, "request headers not received in time", "header_timeout")


class _Refused(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.detail)
        self.refusal = refusal


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of ``Guard`` (the application's ``guard`` attribute; without
    one it behaves as uvicorn's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard: Guard | None = getattr(self.app, "guard", None)
        self._timer: asyncio.TimerHandle | None = None  # the header or body deadline running
        self._in_head = True  # between a request's first byte (or the connection's start) and its headers' end
        self._head_bytes = 0  # raw bytes received while in the head
        self._in_body = False  # between a request's headers and the end of its body
        self._begun = False  # a request's first byte came and its headers are not complete yet
        self._refused = False  # the request was answered by the guard: its body is dropped
        self._internal = False
        self._reserved: dict[RequestResponseCycle, int] = {}  # the body bytes each request's cycle holds
        self._started: tuple[RequestResponseCycle, asyncio.Task[None]] | None = None  # the last request's task

    # Deadlines
    def _arm(self, seconds: float, expired: Callable[[], None]) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _header_timeout(self) -> None:
        self._timer = None
        self._refuse(HEADER_TIMEOUT)

    def _body_timeout(self) -> None:
        self._timer = None
        metrics.REQUESTS.labels("server", "body_timeout").inc()
        if not self.transport.is_closing():
            self.transport.close()  # the application's receive() then answers http.disconnect

    def _refuse(self, refusal: Refusal) -> None:
        self._refused = True
        self._disarm()
        metrics.REQUESTS.labels("server", refusal.outcome).inc()
        if not self.transport.is_closing():
            self.transport.write(refusal.response())
            self.transport.close()

    # Connection
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override] # uvicorn's signature
        super().connection_made(transport)
        if self.guard is not None:
            server = self.server
            self._internal = server is not None and server[1] == self.guard.internal_port
            self._arm(self.guard.header_timeout, self._header_timeout)  # a silent connection is not kept

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.guard is not None:
            self.guard.heap.soon()
        for cycle, _ in self.pipeline:  # queued requests that will never run: their reservations back
            self._release(cycle)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        guard = self.guard
        if guard is None:
            super().data_received(data)
            return
        self._unset_keepalive_if_required()
        if self._in_head:  # counted before parsing: a header still growing is buffered by the parser, not seen
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            refused = exc.__context__
            if refused is not None:
                # The parser keeps the callback's exception (its last error); the exception's traceback keeps the
                # frames it went through, and so this protocol, its parser and the chunk being parsed (up to 256
                # KiB of a flood's body): a cycle only a full collection frees, which an idle process never runs.
                # Measured: 14 MiB of heap and 16 of Python arenas held after the load test's flood.
                refused.__traceback__ = None
            if isinstance(refused, _Refused):
                self._refuse(refused.refusal)
                return
            self._invalid()
            return
        except httptools.HttpParserError:
            self._invalid()
            return
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()  # the webhook speaks no other protocol
            return
        if self._refused:
            return
        if self._in_head and self._head_bytes > guard.max_header_bytes:
            self._refuse(HEADERS_TOO_LARGE)  # a head still growing past the limit
            return
        # Deadlines are armed only for what is still incomplete once a chunk is parsed: a request that arrives in
        # one chunk (nearly every callback) arms none. Its time runs from this chunk, its first.
        if self._timer is not None:
            return
        if self._in_head:
            if self._begun:  # a request has begun (an idle keep-alive connection is uvicorn's to time)
                self._arm(guard.header_timeout, self._header_timeout)
        elif self._in_body:
            self._arm(guard.body_timeout, self._body_timeout)

    def _invalid(self) -> None:
        self._refused = True
        self._disarm()
        self.send_400_response("Invalid HTTP request received.")

    # Parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._refused = False
        self._begun = True
        if not self._in_head:  # a keep-alive connection's next request starts (its bytes counted from the next chunk)
            self._in_head = True
            self._head_bytes = 0

    # The URL and the headers are bounded by the bytes counted in ``data_received`` while in the head (the parser
    # buffers at most one chunk more); their size and number are checked once, when the head is complete.

    def on_headers_complete(self) -> None:
        guard = self.guard
        if guard is None:
            super().on_headers_complete()
            return
        self._in_head = self._begun = False
        self._disarm()
        if len(self.headers) > guard.max_headers:
            raise _Refused(TOO_MANY_HEADERS)
        if self._head_bytes > guard.max_header_bytes and (
            len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers) > guard.max_header_bytes
        ):  # (counted exactly only when the chunks of the head, with what followed it, passed the limit)
            raise _Refused(HEADERS_TOO_LARGE)
        decision = guard.admit(
            self._internal, self.parser.get_method(), httptools.parse_url(self.url).path, self.headers
        )
        pipelined = self.cycle is not None and not self.cycle.response_complete
        if isinstance(decision, Refusal):
            if pipelined:  # an answer now would come before the previous request's: close instead
                self._refused = True
                self.transport.close()
                return
            raise _Refused(decision)
        if decision and not guard.budget.take(decision):
            if pipelined:
                self._refused = True
                self.transport.close()
                return
            raise _Refused(Refusal(503, "too many request bodies in flight", "over_budget", retry_after=True))
        super().on_headers_complete()
        if decision:  # given back when the request's task is done (started by now, unless pipelined: then later)
            cycle = self.cycle
            self._reserved[cycle] = decision
            started = self._started
            if started is not None and started[0] is cycle:
                started[1].add_done_callback(functools.partial(self._release, cycle))
        self._in_body = True

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        self._in_body = False
        if self._timer is not None:
            self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        cycle = self.cycle
        super().on_response_complete()
        if self.guard is not None and cycle is not None and cycle.more_body and not self.transport.is_closing():
            # Answered before its whole body came (refused by the application): not worth reading the rest.
            self._disarm()
            self.transport.close()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        # uvicorn's, with the reservation given back when the request's task is done (whatever its end).
        if self.config.reset_contextvars:
            task = self.loop.create_task(cycle.run_asgi(app), context=contextvars.Context())
        else:
            task = self.loop.create_task(cycle.run_asgi(app))
        task.add_done_callback(self.tasks.discard)
        self._started = (cycle, task)
        if cycle in self._reserved:  # a pipelined request, admitted before its turn
            task.add_done_callback(functools.partial(self._release, cycle))
        self.tasks.add(task)

    def _release(self, cycle: RequestResponseCycle, _: object = None) -> None:
        reserved = self._reserved.pop(cycle, 0)
        if reserved and self.guard is not None:
            self.guard.budget.give(reserved)
