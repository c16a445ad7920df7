"""What every platform adapter provides, and the HTTP error mapping they share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

import orjson
from pydantic import SecretStr

from inturn.errors import PermanentPlatformError, TransientPlatformError
from inturn.platforms.transport import HttpTransport, Response
from inturn.schemas import Message, encode_callback_data
from inturn.settings.worker import PlatformSettings

#: Request header carrying inturn's callback data (``inturn.schemas.encode_callback_data``) on platforms whose wire
#: format has no field for it (Messenger, Instagram, Telegram), sent only when ``INTURN_PLATFORM_CALLBACK_HEADER`` is
#: on: the platform simulator reads it for its receipt log; real platforms ignore unknown request headers.
CALLBACK_HEADER = "X-Inturn-Callback-Data"


class AckKind(StrEnum):
    """How a platform confirms a message, which decides what the worker waits for after a send.

    - ``per_message``: one status callback names the message (WhatsApp, Twilio, generic); the webhook publishes it.
    - ``watermark``: a callback carries a timestamp and confirms every earlier message of that recipient
      (Messenger's ``delivery.watermark``); the in-flight message is resolved when the callback names it, or when
      the watermark is later than its send on the platform's clock (``inturn.platforms.messenger.PlatformClock``).
    - ``synchronous``: the send's 2xx answer is the ack (Telegram, Instagram); no webhook wait.
    """

    PER_MESSAGE = "per_message"
    WATERMARK = "watermark"
    SYNCHRONOUS = "synchronous"


@dataclass(frozen=True, slots=True)
class PreparedSend:
    """A message rendered for its platform: ready to POST, nothing left to compute."""

    url: str
    body: bytes
    account: str
    headers: dict[str, str]


def bearer(token: SecretStr) -> dict[str, str]:
    """The headers of a JSON send authorised by a bearer ``token``."""
    return {"Authorization": f"Bearer {token.get_secret_value()}", "Content-Type": "application/json"}


def json_body(obj: object) -> bytes:
    """``obj`` as JSON bytes of exactly their length: ``orjson.dumps`` returns a buffer with at least 4 KiB
    (16 KiB for a 1 KB message) reserved, and thousands of prepared sends wait in memory at once."""
    return bytes(memoryview(orjson.dumps(obj)))


@dataclass(frozen=True, slots=True)
class SendResult:
    """The platform accepted the message under this id."""

    platform_message_id: str
    sent_at_ms: int | None = None  # when the request left (after any wait for a pooled connection)


def watermark_covers(result: SendResult, watermark_ms: int, clock_skew_ms: int = 0) -> bool:
    """Whether a watermark callback covers the message ``result`` is the accepted send of: its send time
    (``sent_at_ms``, when the request was written) is at or before ``watermark_ms`` (the platform's time: every
    message of the recipient sent before it is confirmed).

    The platform stamps the message after the request left, so the watermark naming this message is at or after
    ``sent_at_ms``; in turn, the previous message's watermark is older than this send (it was sent only once that
    one was confirmed), so a watermark older than the send resolves nothing. ``clock_skew_ms``: how far the
    platform's clock may run behind ours (subtracted from the send time). A result without a send time is never
    covered.
    """
    if result.sent_at_ms is None:
        return False
    return result.sent_at_ms - clock_skew_ms <= watermark_ms


class PlatformAdapter(ABC):
    """Renders and sends messages to one platform; raises only the ``PlatformError`` tree."""

    name: ClassVar[str] = ""
    #: How this platform confirms a message (see ``AckKind``).
    ack_kind: ClassVar[AckKind] = AckKind.PER_MESSAGE

    def __init__(self, settings: PlatformSettings, pool_size: int, send_timeout_s: float) -> None:
        self.settings = settings
        # The pool is this platform's alone (a bulkhead). Sends beyond it wait in the transport's line, first come
        # first served, holding nothing but their place. The timeout bounds the request on the wire (connecting,
        # then writing and waiting for the answer), not the wait for a pooled connection: counting that wait would
        # time out requests the platform had just accepted whenever many rooms queue for the pool at once, and
        # their retries would reach the user twice.
        self.transport = HttpTransport(pool_size, send_timeout_s)

    @abstractmethod
    def prepare(self, message: Message, partition: int | None = None) -> PreparedSend:
        """Render ``message`` for this platform (pure CPU; may run ahead of the send). ``partition``: the messages
        partition it was consumed from, for the data the platform echoes with its statuses (the webhook publishes
        the ack to that partition)."""

    @abstractmethod
    def parse_accepted(self, body: bytes) -> SendResult:
        """The platform message id from a 2xx response body."""

    def with_callback_header(self, headers: dict[str, str], message: Message, partition: int | None) -> dict[str, str]:
        """``headers``, plus ``CALLBACK_HEADER`` when the settings ask for it (a dict per message then)."""
        if not self.settings.platform_callback_header:
            return headers
        return {**headers, CALLBACK_HEADER: encode_callback_data(message.room_id, message.message_id, partition)}

    async def send(self, prepared: PreparedSend, gate: Callable[[], bool] | None = None) -> SendResult:
        """POST the prepared message; ``TransientPlatformError`` or ``PermanentPlatformError`` on failure, and
        ``RequestWithdrawn`` when ``gate`` closed while it waited in line for a connection (never written).

        ``sent_at_ms`` of the result is when the request was written, after any wait for a pooled connection.
        A coroutine over ``HttpTransport.request``, which returns a future: a caller that wants no Task per send
        can attach a callback to that future and map its outcome with ``result_of``."""
        try:
            response = await self.transport.request(prepared.url, prepared.headers, prepared.body, gate)
        except TimeoutError as exc:
            raise TransientPlatformError(f"send timed out: {exc}", status=None) from exc
        except ConnectionError as exc:
            raise TransientPlatformError(f"connection error: {exc}") from exc
        except OSError as exc:  # refused, unreachable, TLS verification failed
            raise TransientPlatformError(f"connection error: {exc.__class__.__name__}: {exc}") from exc
        except ValueError as exc:  # not an http(s) URL: configuration no retry mends
            raise PermanentPlatformError(str(exc)) from exc
        return self.result_of(response)

    def result_of(self, response: Response) -> SendResult:
        """The outcome of a complete answer: the accepted message, or the error ``send`` raises for it."""
        status, body = response.status, response.body
        if 200 <= status < 300:
            try:
                accepted = self.parse_accepted(body)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise PermanentPlatformError(f"unexpected 2xx body: {body[:200]!r}", status=status) from exc
            return SendResult(accepted.platform_message_id, response.sent_at_ms)
        raise self.classify_error(status, body, response.retry_after)

    def classify_error(
        self, status: int, body: bytes, retry_after: str | None
    ) -> TransientPlatformError | PermanentPlatformError:
        """Map a non-2xx answer: 429, 5xx and 408 are transient; any other 4xx is permanent."""
        snippet = body[:300].decode(errors="replace")
        if status == 429 or status == 408 or status >= 500:
            return TransientPlatformError(f"HTTP {status}: {snippet}", status=status, retry_after=_seconds(retry_after))
        return PermanentPlatformError(f"HTTP {status}: {snippet}", status=status)

    async def close(self) -> None:
        """Close the connection pool; a send still on the wire fails with ``TransientPlatformError``."""
        await self.transport.close()


def _seconds(value: str | None) -> float | None:
    """Retry-After as seconds (the delta-seconds form; HTTP-dates are rare from these APIs and ignored)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def message_text(payload: dict[str, object]) -> str:
    """The text of a message payload in either of the shapes inturn's producers use: the Cloud API's
    ``{"type": "text", "text": {"body": ...}}``, or ``{"text": "..."}`` / ``{"body": "..."}``; ``ValueError``
    when it has none (the adapters then refuse the message as permanent)."""
    text = payload.get("text")
    if isinstance(text, dict):
        text = text.get("body")
    if text is None:
        text = payload.get("body")
    if not isinstance(text, str) or not text:
        raise ValueError("the payload carries no text (text.body, text or body)")
    return text
