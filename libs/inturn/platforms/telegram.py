"""Telegram Bot API: ``POST /bot{token}/sendMessage`` with ``chat_id`` and ``text`` as JSON.

Wire format, from the Bot API reference (https://core.telegram.org/bots/api#making-requests and #sendmessage):
every answer is ``{"ok": true, "result": ...}`` (for sendMessage the sent Message, whose ``message_id`` names it)
or ``{"ok": false, "error_code": ..., "description": ..., "parameters"?: {"retry_after"?: seconds,
"migrate_to_chat_id"?: ...}}`` (ResponseParameters: "in case of exceeding flood control, the number of seconds left
to wait before the request can be repeated"). The HTTP status mirrors ``error_code``.

Acks: the Bot API has no delivery callback; the ``ok: true`` answer is the ack (kind ``synchronous``).
Message ids are per chat, so the platform message id is ``{chat_id}:{message_id}``.

Errors: ``error_code`` 429 (flood control, ``parameters.retry_after``) and 5xx are transient; 400 (bad request,
chat not found, group migrated), 401 (bad token), 403 (bot blocked or kicked), 404 and 409 are permanent.

Idempotency: the Bot API offers none; a re-send after a crash is a second message.
"""

from __future__ import annotations

import functools

import orjson

from inturn.errors import PermanentPlatformError, TransientPlatformError
from inturn.platforms.base import AckKind, PlatformAdapter, PreparedSend, SendResult, _seconds, json_body, message_text
from inturn.schemas import Message

#: sendMessage parameters a payload may set besides the text (the Bot API's names).
_OPTIONAL_PARAMS = (
    "parse_mode",
    "entities",
    "link_preview_options",
    "disable_notification",
    "protect_content",
    "reply_parameters",
    "reply_markup",
    "message_thread_id",
)


class TelegramAdapter(PlatformAdapter):
    """Sends to the Telegram Bot API (or the platform simulator's Telegram route); the answer is the ack."""

    name = "telegram"
    ack_kind = AckKind.SYNCHRONOUS

    def prepare(self, message: Message, partition: int | None = None) -> PreparedSend:
        """Render the sendMessage body; the recipient is the ``chat_id``; the account is the bot."""
        try:
            text = message_text(message.payload)
        except ValueError as exc:
            raise PermanentPlatformError(f"telegram: {exc}") from exc
        recipient: int | str = int(message.recipient) if message.recipient.lstrip("-").isdigit() else message.recipient
        body: dict[str, object] = {"chat_id": recipient, "text": text}
        for name in _OPTIONAL_PARAMS:
            if name in message.payload:
                body[name] = message.payload[name]
        headers = self.with_callback_header(self._headers, message, partition)
        return PreparedSend(url=self._url, body=json_body(body), account="bot", headers=headers)

    @functools.cached_property
    def _url(self) -> str:
        token = self.settings.telegram_bot_token.get_secret_value()
        return f"{self.settings.telegram_base_url.rstrip('/')}/bot{token}/sendMessage"

    @functools.cached_property
    def _headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json"}

    def parse_accepted(self, body: bytes) -> SendResult:
        """``{"ok": true, "result": {"message_id": 42, "chat": {"id": ...}, ...}}``; an ``ok: false`` answer with a
        2xx status is refused (``ValueError``: permanent)."""
        doc = orjson.loads(body)
        if doc.get("ok") is not True:
            raise ValueError("ok is not true")
        result = doc["result"]
        message_id = result["message_id"]
        if isinstance(message_id, bool) or not isinstance(message_id, int):
            raise TypeError("message_id is not an integer")
        return SendResult(platform_message_id=f"{result['chat']['id']}:{message_id}")

    def classify_error(
        self, status: int, body: bytes, retry_after: str | None
    ) -> TransientPlatformError | PermanentPlatformError:
        """By ``error_code`` (the HTTP status when the body has none): 429 and 5xx transient, with
        ``parameters.retry_after`` over any Retry-After header; every other code permanent."""
        code, description, wait = status, "", _seconds(retry_after)
        try:
            doc = orjson.loads(body)
            if isinstance(doc, dict):
                code = int(doc.get("error_code", status))
                description = str(doc.get("description", ""))
                parameters = doc.get("parameters")
                if isinstance(parameters, dict) and isinstance(parameters.get("retry_after"), int | float):
                    wait = max(0.0, float(parameters["retry_after"]))
        except (orjson.JSONDecodeError, TypeError, ValueError):
            description = body[:300].decode(errors="replace")
        reason = f"HTTP {status}: error_code {code}: {description}"
        if code == 429 or code >= 500:
            return TransientPlatformError(reason, status=status, retry_after=wait)
        return PermanentPlatformError(reason, status=status)
