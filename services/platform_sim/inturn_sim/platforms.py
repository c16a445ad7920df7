"""The wire formats of the platforms the simulator speaks besides WhatsApp: what a send must look like, the answer
it gets, and the callbacks (pure functions; the behaviour is ``simulator.py``'s).

- Messenger Send API (https://developers.facebook.com/docs/messenger-platform/reference/send-api): JSON with
  ``recipient.id``, ``messaging_type`` and ``message`` (text or attachment); answer ``{recipient_id, message_id}``.
  Callbacks: ``message_deliveries`` events, ``delivery {mids?, watermark}`` (object ``page``, signed
  ``X-Hub-Signature-256``).
- Instagram messaging: the same Send API body and answer; callbacks: ``messaging_seen`` events, ``read {mid}``
  (object ``instagram``).
- Twilio Messages resource (https://www.twilio.com/docs/messaging/api/message-resource): a form with ``To``,
  ``Body``, ``From`` or ``MessagingServiceSid``, ``StatusCallback``; answer 201 with the Message resource (``sid``
  ``SM...``); errors ``{code, message, more_info, status}``. Status callbacks: forms with ``MessageSid``,
  ``MessageStatus``, ... POSTed to the StatusCallback URL and signed with ``X-Twilio-Signature``.
- Telegram Bot API (https://core.telegram.org/bots/api#sendmessage): ``chat_id`` and ``text`` (JSON or form);
  answer ``{"ok": true, "result": Message}``; errors ``{"ok": false, "error_code", "description", "parameters"?}``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from inturn.platforms.twilio import twilio_signature

MESSAGING_TYPES = frozenset({"RESPONSE", "UPDATE", "MESSAGE_TAG"})
_trace_ids = itertools.count(1)

# --- Messenger and Instagram ---------------------------------------------------------------------------------------

#: HTTP status -> (Graph API code, message) of the answers the simulator gives on these routes.
GRAPH_ERRORS: dict[int, tuple[int, str]] = {
    400: (100, "(#100) Invalid parameter"),
    401: (190, "Invalid OAuth access token - Cannot parse access token"),
    429: (613, "(#613) Calls to this api have exceeded the rate limit."),
    500: (1200, "(#1200) Temporary send message failure. Please try again later"),
    503: (2, "(#2) Service temporarily unavailable"),
}


def graph_error(status: int, details: str | None = None) -> bytes:
    """A Graph API error object for an HTTP ``status``."""
    code, message = GRAPH_ERRORS[status]
    error: dict[str, Any] = {"message": message, "type": "OAuthException", "code": code,
                             "fbtrace_id": f"Asim{next(_trace_ids):010x}"}  # fmt: skip
    if details:
        error["error_data"] = {"details": details}
    return orjson.dumps({"error": error})


def send_api_problem(body: Any) -> str | None:
    """Why a Send API body is not valid (None when it is)."""
    if not isinstance(body, dict):
        return "The request body must be a JSON object."
    recipient = body.get("recipient")
    if not isinstance(recipient, dict) or not isinstance(recipient.get("id"), str) or not recipient["id"]:
        return "Param recipient[id] is required."
    if body.get("messaging_type", "RESPONSE") not in MESSAGING_TYPES:
        return f"Param messaging_type must be one of {sorted(MESSAGING_TYPES)}."
    message = body.get("message")
    if not isinstance(message, dict) or not (isinstance(message.get("text"), str) or "attachment" in message):
        return "Param message must be an object with text or attachment."
    return None


def send_api_answer(recipient: str, message_id: str) -> bytes:
    """The 200 answer of a Send API call."""
    return orjson.dumps({"recipient_id": recipient, "message_id": message_id})


def delivery_event(user: str, page: str, mids: list[str] | None, watermark_ms: int) -> dict[str, Any]:
    """A Messenger ``message_deliveries`` event; ``mids`` left out when None."""
    delivery: dict[str, Any] = {"watermark": watermark_ms}
    if mids is not None:
        delivery = {"mids": mids, "watermark": watermark_ms}
    return {"sender": {"id": user}, "recipient": {"id": page}, "delivery": delivery}


def seen_event(user: str, account: str, mid: str, ts_ms: int) -> dict[str, Any]:
    """An Instagram ``messaging_seen`` event: ``mid`` was read."""
    return {"sender": {"id": user}, "recipient": {"id": account}, "timestamp": ts_ms, "read": {"mid": mid}}


def messaging_payload(obj: str, events: Iterable[tuple[str, dict[str, Any]]], time_ms: int) -> bytes:
    """A webhook body of object ``page`` or ``instagram`` with ``(account, event)`` pairs, one entry per account."""
    by_account: dict[str, list[dict[str, Any]]] = {}
    for account, event in events:
        by_account.setdefault(account, []).append(event)
    entries = [{"id": account, "time": time_ms, "messaging": items} for account, items in by_account.items()]
    return orjson.dumps({"object": obj, "entry": entries})


# --- Twilio --------------------------------------------------------------------------------------------------------

#: HTTP status -> (Twilio error code, message).
TWILIO_ERRORS: dict[int, tuple[int, str]] = {
    400: (21211, "Invalid 'To' Phone Number"),
    401: (20003, "Authenticate"),
    429: (20429, "Too Many Requests"),
    500: (20500, "Internal Server Error"),
    503: (20503, "Service Unavailable"),
}
TWILIO_API_VERSION = "2010-04-01"


def twilio_error(status: int, message: str | None = None) -> bytes:
    """Twilio's REST error object for an HTTP ``status``."""
    code, default = TWILIO_ERRORS[status]
    return orjson.dumps({"code": code, "message": message or default,
                         "more_info": f"https://www.twilio.com/docs/errors/{code}", "status": status})  # fmt: skip


def twilio_problem(form: Mapping[str, str]) -> str | None:
    """Why a Messages create form is not valid (None when it is)."""
    if not form.get("To"):
        return "A 'To' phone number is required."
    if not form.get("From") and not form.get("MessagingServiceSid"):
        return "A 'From' phone number or a 'MessagingServiceSid' is required."
    if not form.get("Body") and not form.get("MediaUrl") and not form.get("ContentSid"):
        return "A text message Body, Media URL or Content SID is required."
    callback = form.get("StatusCallback")
    if callback is not None and not callback.startswith(("http://", "https://")):
        return "The StatusCallback URL is not a valid URL."
    return None


def twilio_answer(sid: str, account: str, form: Mapping[str, str], created_rfc2822: str) -> bytes:
    """The 201 answer: the new Message resource (initial status ``queued``, ``accepted`` with a Messaging Service)."""
    service = form.get("MessagingServiceSid")
    return orjson.dumps(
        {
            "sid": sid,
            "account_sid": account,
            "api_version": TWILIO_API_VERSION,
            "body": form.get("Body", ""),
            "date_created": created_rfc2822,
            "direction": "outbound-api",
            "from": form.get("From"),
            "messaging_service_sid": service,
            "status": "accepted" if service else "queued",
            "to": form["To"],
            "uri": f"/{TWILIO_API_VERSION}/Accounts/{account}/Messages/{sid}.json",
        }
    )


#: ErrorCode of statuses that end badly (Twilio's error dictionary: 30003 unreachable handset, 30008 unknown).
TWILIO_STATUS_ERRORS = {"undelivered": "30003", "failed": "30008"}


def twilio_status_form(sid: str, status: str, account: str, sender: str, to: str) -> list[tuple[str, str]]:
    """The parameters of one status callback (``ErrorCode`` on failed and undelivered)."""
    params = [
        ("AccountSid", account),
        ("ApiVersion", TWILIO_API_VERSION),
        ("From", sender),
        ("MessageSid", sid),
        ("MessageStatus", status),
        ("SmsSid", sid),
        ("SmsStatus", status),
        ("To", to),
    ]
    if status in TWILIO_STATUS_ERRORS:
        params.append(("ErrorCode", TWILIO_STATUS_ERRORS[status]))
    return params


def twilio_signed(auth_token: bytes, url: str, params: list[tuple[str, str]]) -> str:
    """``X-Twilio-Signature`` of a callback to ``url``."""
    return twilio_signature(auth_token, url, params)


# --- Telegram ------------------------------------------------------------------------------------------------------

TELEGRAM_DESCRIPTIONS = {
    400: "Bad Request: message text is empty",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    429: "Too Many Requests: retry after {after}",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def telegram_error(status: int, retry_after: int | None = None, description: str | None = None) -> bytes:
    """An ``ok: false`` answer; ``parameters.retry_after`` on 429."""
    text = description or TELEGRAM_DESCRIPTIONS.get(status, "Error").format(after=retry_after or 1)
    doc: dict[str, Any] = {"ok": False, "error_code": status, "description": text}
    if status == 429:
        doc["parameters"] = {"retry_after": retry_after or 1}
    return orjson.dumps(doc)


def telegram_answer(chat_id: int | str, message_id: int, text: str, date_s: int) -> bytes:
    """The answer of sendMessage: the sent Message."""
    chat = {"id": chat_id, "type": "private" if isinstance(chat_id, int) and chat_id > 0 else "channel"}
    return orjson.dumps(
        {
            "ok": True,
            "result": {
                "message_id": message_id,
                "date": date_s,
                "chat": chat,
                "text": text,
                "from": {"id": 1, "is_bot": True, "first_name": "inturn-sim"},
            },
        }
    )
