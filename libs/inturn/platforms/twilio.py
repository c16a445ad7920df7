"""Twilio Programmable Messaging (SMS, and WhatsApp through Twilio): ``POST
/2010-04-01/Accounts/{AccountSid}/Messages.json``, form-encoded, HTTP Basic auth (Account SID : Auth Token).

Wire format, from Twilio's Message resource reference (https://www.twilio.com/docs/messaging/api/message-resource):
``To``, ``From`` (or ``MessagingServiceSid``), ``Body`` and ``StatusCallback`` as
``application/x-www-form-urlencoded``; the 201 answer is the Message resource as JSON, whose ``sid`` (``SM...``)
names the message; errors are ``{"code", "message", "more_info", "status"}`` (429 / code 20429: too many requests).

Acks: Twilio POSTs a form-encoded status callback to the ``StatusCallback`` URL at each status change
(``MessageSid``, ``MessageStatus``: queued, sending, sent, delivered, undelivered, failed, read; ``ErrorCode``),
signed with ``X-Twilio-Signature`` (https://www.twilio.com/docs/messaging/guides/outbound-message-status-in-status-callbacks,
https://www.twilio.com/docs/usage/webhooks/messaging-webhooks). The ack kind is ``per_message``. Twilio echoes
nothing of the body, but it calls the URL exactly as given, query string included: inturn's routing data (room,
message id, consumed partition: ``inturn.schemas.encode_callback_data``) travels in the query parameter
``CALLBACK_PARAM``, and the webhook reads it back from the URL it was called at.

Idempotency: the Messages API offers no idempotency key for creating a message; a re-send after a crash is a second
message.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Iterable
from urllib.parse import urlencode

import orjson

from inturn.errors import PermanentPlatformError
from inturn.platforms.base import AckKind, PlatformAdapter, PreparedSend, SendResult, message_text
from inturn.schemas import Message, encode_callback_data
from inturn.settings.worker import PlatformSettings

#: The StatusCallback query parameter carrying inturn's callback data (the webhook reads the same name).
CALLBACK_PARAM = "inturn"


def status_callback_url(base: str, room_id: str, message_id: str, partition: int | None) -> str:
    """``base`` with inturn's callback data for one message added to its query string."""
    separator = "&" if "?" in base else "?"
    return base + separator + urlencode({CALLBACK_PARAM: encode_callback_data(room_id, message_id, partition)})


def twilio_signature(auth_token: bytes, url: str, params: Iterable[tuple[str, str]]) -> str:
    """``X-Twilio-Signature`` of a request to ``url`` with POST ``params``
    (https://www.twilio.com/docs/usage/security#validating-requests): base64 of HMAC-SHA1 with the Auth Token over
    the URL followed by each parameter's name and value, names sorted (a repeated name's values sorted too)."""
    values: dict[str, set[str]] = {}
    for name, value in params:
        values.setdefault(name, set()).add(value)
    data = url + "".join(name + value for name in sorted(values) for value in sorted(values[name]))
    return base64.b64encode(hmac.digest(auth_token, data.encode(), "sha1")).decode()


class TwilioAdapter(PlatformAdapter):
    """Sends to Twilio's Messages resource (or the platform simulator's Twilio route)."""

    name = "twilio"
    ack_kind = AckKind.PER_MESSAGE

    def __init__(self, settings: PlatformSettings, pool_size: int, send_timeout_s: float) -> None:
        super().__init__(settings, pool_size, send_timeout_s)
        self._headers: dict[str, dict[str, str]] = {}

    def prepare(self, message: Message, partition: int | None = None) -> PreparedSend:
        """Render the form body; the account is the Account SID (the message's account when it names one)."""
        settings = self.settings
        account = message.account or settings.twilio_account_sid
        if not account:
            raise PermanentPlatformError("twilio: no Account SID: the message has no account and none is configured")
        try:
            text = message_text(message.payload)
        except ValueError as exc:
            raise PermanentPlatformError(f"twilio: {exc}") from exc
        fields: dict[str, str] = {"To": message.recipient, "Body": text}
        if settings.twilio_messaging_service_sid:
            fields["MessagingServiceSid"] = settings.twilio_messaging_service_sid
        elif settings.twilio_from:
            fields["From"] = settings.twilio_from
        else:
            raise PermanentPlatformError("twilio: neither INTURN_TWILIO_FROM nor a Messaging Service SID is set")
        if settings.twilio_status_callback_url:
            fields["StatusCallback"] = status_callback_url(
                settings.twilio_status_callback_url, message.room_id, message.message_id, partition
            )
        return PreparedSend(
            url=f"{settings.twilio_base_url.rstrip('/')}/2010-04-01/Accounts/{account}/Messages.json",
            body=urlencode(fields).encode(),
            account=account,
            headers=self._headers_for(account),
        )

    def _headers_for(self, account: str) -> dict[str, str]:
        # One dict per account, shared by its prepared sends (thousands wait at once). The Basic auth user is the
        # configured Account SID (a subaccount's messages are sent with the parent's credentials).
        headers = self._headers.get(account)
        if headers is None:
            user = self.settings.twilio_account_sid or account
            credentials = f"{user}:{self.settings.twilio_auth_token.get_secret_value()}".encode()
            headers = self._headers[account] = {
                "Authorization": "Basic " + base64.b64encode(credentials).decode(),
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            }
        return headers

    def parse_accepted(self, body: bytes) -> SendResult:
        """The Message resource: ``{"sid": "SM...", "status": "queued", ...}``."""
        sid = orjson.loads(body)["sid"]
        if not isinstance(sid, str) or not sid:
            raise ValueError("sid is not a non-empty string")
        return SendResult(platform_message_id=sid)
