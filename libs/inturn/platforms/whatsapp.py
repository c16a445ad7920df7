"""WhatsApp Cloud API: ``POST /{version}/{phone_number_id}/messages`` with a bearer token.

The room and message id travel in ``biz_opaque_callback_data``, which WhatsApp echoes in every
status callback, so the webhook can route the ack to the room's partition. The Cloud API offers
no idempotency key; a re-send after a crash is therefore a second message at the platform, which
is why the worker re-sends at most the one in-flight message per room.
"""

from __future__ import annotations

import functools

import orjson

from inturn.errors import PermanentPlatformError, TransientPlatformError
from inturn.platforms.base import AckKind, PlatformAdapter, PreparedSend, SendResult, _seconds, bearer, json_body
from inturn.schemas import Message, encode_callback_data

#: Meta error codes that mean "slow down", answered with HTTP 400 rather than 429 at times.
_THROTTLE_CODES = frozenset({4, 80007, 130429, 131048, 131056})


class WhatsAppAdapter(PlatformAdapter):
    """Sends to the WhatsApp Cloud API (or the platform simulator, which speaks the same wire format)."""

    name = "whatsapp"
    ack_kind = AckKind.PER_MESSAGE  # one status per message, echoing inturn's callback data

    def prepare(self, message: Message, partition: int | None = None) -> PreparedSend:
        """Render the Cloud API body; the account is the sender's phone_number_id."""
        account = message.account or self.settings.whatsapp_phone_number_id
        if not account:
            raise PermanentPlatformError("no phone_number_id: the message has no account and none is configured")
        body = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": message.recipient,
            **message.payload,
            "biz_opaque_callback_data": encode_callback_data(message.room_id, message.message_id, partition),
        }
        base = self.settings.whatsapp_base_url.rstrip("/")
        return PreparedSend(
            url=f"{base}/{self.settings.whatsapp_api_version}/{account}/messages",
            body=json_body(body),
            account=account,
            headers=self._headers,
        )

    @functools.cached_property
    def _headers(self) -> dict[str, str]:
        # One dict shared by every prepared send: thousands of them wait at once, each its own copy adds up.
        return bearer(self.settings.whatsapp_access_token)

    def parse_accepted(self, body: bytes) -> SendResult:
        """``{"messages": [{"id": "wamid..."}]}``."""
        return SendResult(platform_message_id=str(orjson.loads(body)["messages"][0]["id"]))

    def classify_error(
        self, status: int, body: bytes, retry_after: str | None
    ) -> TransientPlatformError | PermanentPlatformError:
        """Meta's throttling codes are transient whatever the HTTP status."""
        try:
            code = int(orjson.loads(body)["error"]["code"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            code = None
        if code in _THROTTLE_CODES:
            return TransientPlatformError(
                f"HTTP {status}: throttled (code {code})", status=status, retry_after=_seconds(retry_after)
            )
        return super().classify_error(status, body, retry_after)
