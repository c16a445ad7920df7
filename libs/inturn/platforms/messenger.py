"""Messenger Platform Send API: ``POST /{version}/{page-id}/messages`` (or ``/me/messages``) with a Page token.

Wire format, from Meta's Send API reference
(https://developers.facebook.com/docs/messenger-platform/reference/send-api): a JSON body with
``recipient: {"id": PSID}``, ``messaging_type`` (``RESPONSE``, ``UPDATE`` or ``MESSAGE_TAG`` with a ``tag``) and
``message: {"text": ...}`` (or an attachment); the answer is ``{"recipient_id": ..., "message_id": ...}``.
Errors are Graph API error objects ``{"error": {"code", "message", ...}}``.

Acks: ``message_deliveries`` webhook events
(https://developers.facebook.com/documentation/business-messaging/messenger-platform/webhooks/webhook-events/message-deliveries)
carry ``delivery.watermark`` ("all messages that were sent before this timestamp were delivered", always present)
and ``delivery.mids`` (sometimes absent): the ack kind is ``watermark``. The send carries no data Messenger echoes
in delivery events, so the webhook finds the room from the recipient (the PSID in the event's ``sender.id``).

Clocks: a watermark is the platform's time, a send's ``sent_at_ms`` the worker's. The worker does not trust the two
clocks to agree: ``PlatformClock`` learns how far the platform's watermarks run ahead of the worker's send times from
the deliveries that name the worker's message by its mid, and a watermark-only delivery resolves the in-flight
message only when it is later than that message's send on the platform's clock (docs/reliability.md, clock rows).

Idempotency: the Send API offers no idempotency key; a re-send after a crash is a second message.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import orjson

from inturn.errors import PermanentPlatformError, TransientPlatformError
from inturn.platforms.base import (
    AckKind,
    PlatformAdapter,
    PreparedSend,
    SendResult,
    _seconds,
    bearer,
    json_body,
    message_text,
)
from inturn.schemas import Message

#: Graph API error codes that mean "try later" whatever the HTTP status (Meta's error code reference and the
#: Messenger Platform's: 1 unknown, 2 service unavailable, 4/17/32/613 rate limits, 1200 temporary send failure).
GRAPH_TRANSIENT_CODES = frozenset({1, 2, 4, 17, 32, 613, 1200})


@dataclass(frozen=True, slots=True)
class GraphSend:
    """Where and as whom an adapter calls the Send API."""

    api: str  # the Graph API's base URL and version
    default_account: str  # the account a message that names none is sent from (``me``: the token's own)
    messaging_type: str  # of sends whose payload sets none
    headers: dict[str, str]  # shared by every prepared send (thousands wait at once)


def graph_error(status: int, body: bytes, retry_after: str | None) -> TransientPlatformError | None:
    """A transient error for a Graph API error object whose code means "try later"; None for any other answer."""
    try:
        code = int(orjson.loads(body)["error"]["code"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    if code not in GRAPH_TRANSIENT_CODES:
        return None
    return TransientPlatformError(
        f"HTTP {status}: Graph API code {code} (try later)", status=status, retry_after=_seconds(retry_after)
    )


class PlatformClock:
    """How far a platform's watermarks run ahead of this worker's clock, learned without trusting either clock.

    A delivery that names a message by its mid carries a watermark at or after the platform's timestamp of that
    message, which the platform took after the request left: ``watermark - sent_at_ms`` (the worker's clock) is at
    least the platform clock's lead over the worker's, whatever the two clocks say. The smallest such difference
    over the last ``window`` to ``2 * window`` observations (``lead_ms``) is therefore never below the true lead
    (plus the least time a request took to be accepted), and ``sent_at_ms + lead_ms <= watermark`` holds only for a
    watermark the platform gave after the send left: never for the older watermark of a message sent before it
    (``covers``). A genuine watermark of a message accepted faster than every one observed so far is not covered
    yet: the worker's ack router keeps it and judges it again whenever the lead falls (``AckRouter._lead_fell``), so
    its message waits for a smaller lead, its next delivery or its ack timeout (latency, never order). Until a first
    observation the worker's clock is trusted (lead 0).
    """

    def __init__(self, window: int = 1000) -> None:
        self._window = window
        self._seen = 0
        self._current: int | None = None  # the smallest lead of the window being filled
        self._previous: int | None = None  # that of the window before it

    @property
    def lead_ms(self) -> int | None:
        """The learned lead of the platform's clock over the worker's, ms (None until a first observation)."""
        if self._current is None:
            return self._previous
        if self._previous is None:
            return self._current
        return min(self._current, self._previous)

    def observe(self, sent_at_ms: int, watermark_ms: int) -> None:
        """A delivery naming a message sent at ``sent_at_ms`` (worker's clock) carried ``watermark_ms``."""
        lead = watermark_ms - sent_at_ms
        self._current = lead if self._current is None else min(self._current, lead)
        self._seen += 1
        if self._seen >= self._window:  # a fresh window: a lead that grew (a clock stepped) is learned in time
            self._previous, self._current, self._seen = self._current, None, 0

    def covers(self, sent_at_ms: int | None, watermark_ms: int) -> bool:
        """Whether ``watermark_ms`` (platform's clock) is at or after the send at ``sent_at_ms`` (worker's clock) on the
        platform's clock; a send without a time is never covered."""
        if sent_at_ms is None:
            return False
        return sent_at_ms + (self.lead_ms or 0) <= watermark_ms


class MessengerAdapter(PlatformAdapter):
    """Sends to the Messenger Send API (or the platform simulator's Messenger route)."""

    name = "messenger"
    ack_kind = AckKind.WATERMARK

    def prepare(self, message: Message, partition: int | None = None) -> PreparedSend:
        """Render the Send API body; the account is the Page id (``me`` when none is known). ``partition`` is not
        sent in the body: Messenger echoes nothing of a send in its delivery events (see ``CALLBACK_HEADER``)."""
        payload, graph = message.payload, self._graph
        content = payload.get("message")
        if not isinstance(content, dict):
            try:
                content = {"text": message_text(payload)}
            except ValueError as exc:
                raise PermanentPlatformError(f"messenger: {exc}") from exc
        body: dict[str, object] = {
            "recipient": {"id": message.recipient},
            "messaging_type": payload.get("messaging_type", graph.messaging_type),
            "message": content,
        }
        if "tag" in payload:
            body["tag"] = payload["tag"]
        account = message.account or graph.default_account
        return PreparedSend(
            url=f"{graph.api}/{account}/messages",
            body=json_body(body),
            account=account,
            headers=self.with_callback_header(graph.headers, message, partition),
        )

    @functools.cached_property
    def _graph(self) -> GraphSend:
        s = self.settings
        # A bearer header rather than the access_token query parameter of the docs' curl example: the Graph API
        # accepts both, and the token stays out of URLs.
        api, token = f"{s.messenger_base_url.rstrip('/')}/{s.messenger_api_version}", s.messenger_page_access_token
        return GraphSend(api, s.messenger_page_id or "me", s.messenger_messaging_type, bearer(token))

    def parse_accepted(self, body: bytes) -> SendResult:
        """``{"recipient_id": "...", "message_id": "..."}``."""
        return SendResult(platform_message_id=str(orjson.loads(body)["message_id"]))

    def classify_error(
        self, status: int, body: bytes, retry_after: str | None
    ) -> TransientPlatformError | PermanentPlatformError:
        """Graph API throttling and temporary codes are transient whatever the HTTP status."""
        return graph_error(status, body, retry_after) or super().classify_error(status, body, retry_after)
