"""What every platform adapter provides, and the HTTP error mapping they share."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass

import aiohttp
import orjson

from inturn.errors import PermanentPlatformError, TransientPlatformError
from inturn.platforms.slots import Slots
from inturn.schemas import Message, now_ms
from inturn.settings.worker import PlatformSettings


@dataclass(frozen=True, slots=True, weakref_slot=True)
class PreparedSend:
    """A message rendered for its platform: ready to POST, nothing left to compute (weakly referenceable, so a
    test can see that a sent one is freed)."""

    url: str
    body: bytes
    account: str
    headers: dict[str, str]


def json_body(obj: object) -> bytes:
    """``obj`` as JSON bytes of exactly their length: ``orjson.dumps`` returns a buffer with at least 4 KiB
    (16 KiB for a 1 KB message) reserved, and thousands of prepared sends wait in memory at once."""
    return bytes(memoryview(orjson.dumps(obj)))


@dataclass(frozen=True, slots=True)
class SendResult:
    """The platform accepted the message under this id."""

    platform_message_id: str
    sent_at_ms: int | None = None  # when the request left (after any wait for a pooled connection)


class PlatformAdapter(ABC):
    """Renders and sends messages to one platform; raises only the ``PlatformError`` tree."""

    name: str = ""

    def __init__(self, settings: PlatformSettings, pool_size: int, send_timeout_s: float) -> None:
        self.settings = settings
        self._pool_size = pool_size
        # The timeout bounds the request on the wire (connecting, then waiting for the answer), not the wait for
        # a free pooled connection: counting that wait would time out requests the platform had just accepted
        # whenever many rooms queue for the pool at once, and their retries would reach the user twice.
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=None, sock_connect=send_timeout_s, sock_read=send_timeout_s
        )
        self._session: aiohttp.ClientSession | None = None
        # Sends beyond the pool wait here, holding nothing but their place in line: a send queued inside
        # aiohttp would already hold a whole request (a few KB), times every room waiting at once.
        self._slots = Slots(pool_size)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._pool_size, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    @abstractmethod
    def prepare(self, message: Message) -> PreparedSend:
        """Render ``message`` for this platform (pure CPU; may run ahead of the send)."""

    @abstractmethod
    def parse_accepted(self, body: bytes) -> SendResult:
        """The platform message id from a 2xx response body."""

    async def send(self, prepared: PreparedSend) -> SendResult:
        """POST the prepared message; ``TransientPlatformError`` or ``PermanentPlatformError`` on failure."""
        try:
            async with self._slots:
                sent_at_ms = now_ms()
                async with self._client().post(prepared.url, data=prepared.body, headers=prepared.headers) as resp:
                    body = await resp.read()
                    status = resp.status
                    retry_after = resp.headers.get("Retry-After")
        except TimeoutError as exc:
            raise TransientPlatformError("send timed out", status=None) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise TransientPlatformError(f"connection error: {exc.__class__.__name__}: {exc}") from exc
        if 200 <= status < 300:
            try:
                return SendResult(self.parse_accepted(body).platform_message_id, sent_at_ms)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise PermanentPlatformError(f"unexpected 2xx body: {body[:200]!r}", status=status) from exc
        raise self.classify_error(status, body, retry_after)

    def classify_error(
        self, status: int, body: bytes, retry_after: str | None
    ) -> TransientPlatformError | PermanentPlatformError:
        """Map a non-2xx answer: 429, 5xx and 408 are transient; any other 4xx is permanent."""
        snippet = body[:300].decode(errors="replace")
        if status == 429 or status == 408 or status >= 500:
            return TransientPlatformError(f"HTTP {status}: {snippet}", status=status, retry_after=_seconds(retry_after))
        return PermanentPlatformError(f"HTTP {status}: {snippet}", status=status)

    async def close(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            # Let aiohttp's connector finish closing transports (its documented graceful-close wait).
            await asyncio.sleep(0)
            self._session = None


def _seconds(value: str | None) -> float | None:
    """Retry-After as seconds (the delta-seconds form; HTTP-dates are rare from these APIs and ignored)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
