"""Meta's wire formats, as the WhatsApp Cloud API writes them: error answers, status callbacks, signatures.

Only what the simulator emits lives here; the fields follow Meta's Cloud API reference
(Graph API error object; ``messages`` webhook with ``statuses[]``; ``X-Hub-Signature-256``).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
from collections.abc import Iterable
from typing import Any

import orjson

# HTTP status -> (Meta error code, message, details) for the answers the simulator can give.
ERRORS: dict[int, tuple[int, str, str]] = {
    400: (100, "(#100) Invalid parameter", "The request has a missing or invalid parameter."),
    401: (190, "Invalid OAuth access token - Cannot parse access token", "The bearer token is not valid."),
    429: (130429, "(#130429) Rate limit hit", "Cloud API message throughput has been reached."),
    500: (131000, "(#131000) Something went wrong", "Message failed to send due to an unknown error."),
    503: (2, "(#2) Service temporarily unavailable", "Temporary due to downtime or due to being overloaded."),
}

#: The ``errors`` entry of a ``failed`` status (the message was accepted, then could not be delivered).
UNDELIVERABLE: list[dict[str, Any]] = [
    {
        "code": 131026,
        "title": "Message undeliverable",
        "message": "Message undeliverable",
        "error_data": {"details": "Message Undeliverable."},
    }
]

_trace_ids = itertools.count(1)


def error_body(status: int, details: str | None = None) -> bytes:
    """Meta's Graph API error object for an HTTP ``status`` the simulator answers with."""
    code, message, default_details = ERRORS[status]
    return orjson.dumps(
        {
            "error": {
                "message": message,
                "type": "OAuthException",
                "code": code,
                "error_data": {"messaging_product": "whatsapp", "details": details or default_details},
                "fbtrace_id": f"Asim{next(_trace_ids):010x}",
            }
        }
    )


def send_answer(to: str, wamid: str) -> bytes:
    """The 200 answer of ``POST /{version}/{phone_number_id}/messages``."""
    return orjson.dumps(
        {"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}], "messages": [{"id": wamid}]}
    )


def format_timestamp(ms: int, precision: str) -> str:
    """Unix seconds as Meta writes them ("1700000000"), or with milliseconds ("1700000000.123", our extension)."""
    if precision == "s":
        return str(ms // 1000)
    seconds, millis = divmod(ms, 1000)
    return f"{seconds}.{millis:03d}"


def status_object(
    wamid: str, status: str, timestamp: str, recipient: str, callback_data: str | None, *, failed: bool = False
) -> dict[str, Any]:
    """One entry of ``value.statuses[]``; ``biz_opaque_callback_data`` only when the send carried it."""
    obj: dict[str, Any] = {"id": wamid, "status": status, "timestamp": timestamp, "recipient_id": recipient}
    if callback_data is not None:
        obj["biz_opaque_callback_data"] = callback_data
    if failed:
        obj["errors"] = UNDELIVERABLE
    return obj


def status_payload(waba_id: str, display_phone_number: str, statuses: Iterable[tuple[str, dict[str, Any]]]) -> bytes:
    """A ``messages`` webhook body with ``(phone_number_id, status object)`` pairs, one change per number."""
    by_number: dict[str, list[dict[str, Any]]] = {}
    for phone_number_id, status in statuses:
        by_number.setdefault(phone_number_id, []).append(status)
    changes = [
        {
            "field": "messages",
            "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": display_phone_number, "phone_number_id": number},
                "statuses": items,
            },
        }
        for number, items in by_number.items()
    ]
    return orjson.dumps({"object": "whatsapp_business_account", "entry": [{"id": waba_id, "changes": changes}]})


def signature(body: bytes, app_secret: bytes) -> str:
    """``X-Hub-Signature-256`` of a callback body: ``sha256=`` + hex HMAC-SHA256 with the app secret."""
    return "sha256=" + hmac.new(app_secret, body, hashlib.sha256).hexdigest()
