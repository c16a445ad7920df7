"""Status callbacks of Messenger, Instagram and Twilio, parsed into ``statuses.Status``; Twilio's signature.

Pure functions, no HTTP: the routes call them with the raw body (and, for Twilio, the public URL it was called at).
Bad input is handled like ``statuses.parse_meta``: an unreadable envelope raises ``SchemaError`` (the whole body
is dead-lettered), one unreadable event among others is a ``Rejected`` with its reason.

Messenger and Instagram (object ``page`` / ``instagram``, ``entry[].messaging[]``), from Meta's references:
- ``message_deliveries`` (Messenger):
  https://developers.facebook.com/documentation/business-messaging/messenger-platform/webhooks/webhook-events/message-deliveries
  ``{"sender": {"id": PSID}, "recipient": {"id": PAGE_ID}, "delivery": {"mids"?: [...], "watermark": ms}}``:
  "all messages that were sent before this timestamp were delivered"; ``mids`` "may not be present".
- ``message_reads`` (Messenger):
  https://developers.facebook.com/documentation/business-messaging/messenger-platform/webhooks/webhook-events/message-reads
  ``"read": {"watermark": ms}``: every message sent before or at it was read.
- ``messaging_seen`` (Instagram): https://developers.facebook.com/documentation/business-messaging/instagram-messaging/webhooks
  ``"read": {"mid": ...}``: that message was read. Instagram has no delivery event.
  Both are signed with ``X-Hub-Signature-256`` exactly like WhatsApp's: ``inturn_webhook.signature.verify``.

A delivery with ``mids`` becomes one ``delivered`` status per mid (each carrying the watermark); without ``mids``
one status whose ``platform_message_id`` is ``watermark.{recipient}.{ms}`` (``watermark_id``: unique per recipient,
so the webhook's replay window, keyed by platform message id and status, never takes one recipient's watermark for
a replay of another's) and ``watermark_ms`` set:
the worker resolves its in-flight message by the watermark (``inturn.platforms.watermark_covers``). Messenger
echoes nothing of a send, so the room comes from the recipient (``RoomResolver`` with the PSID, the Page id as
account); the ack is routed by the room.

Twilio (``application/x-www-form-urlencoded``), from https://www.twilio.com/docs/usage/webhooks/messaging-webhooks
and https://www.twilio.com/docs/messaging/guides/outbound-message-status-in-status-callbacks: ``MessageSid``,
``MessageStatus`` (queued, accepted, scheduled, sending, sent, delivered, undelivered, failed, read, canceled),
``ErrorCode``, ``To``, ``From``, ``AccountSid``. The room, message and partition come from the callback URL's
query (``inturn.platforms.twilio.CALLBACK_PARAM``, put there by the worker's adapter). Twilio's callbacks carry no
event time: ``platform_ts_ms`` is the time the webhook received it.

Twilio's signature (https://www.twilio.com/docs/usage/security#validating-requests): base64 of HMAC-SHA1 with the
Auth Token over the full URL Twilio called (scheme, host, path, query) followed by every POST parameter's name and
value, sorted by name, in ``X-Twilio-Signature``. The URL is the **public** one: behind a proxy or load balancer the
webhook sees another scheme and host, so the route rebuilds it with ``public_url`` (a configured public base URL
first; else ``X-Forwarded-Proto`` / ``X-Forwarded-Host`` when the proxy sets them; else the request's own).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import parse_qs, parse_qsl, urlsplit, urlunsplit

import orjson

from inturn.errors import SchemaError
from inturn.platforms import ADAPTERS, AckKind
from inturn.platforms.twilio import CALLBACK_PARAM, twilio_signature
from inturn_webhook.rooms import RoomResolver
from inturn_webhook.signature import SignatureError
from inturn_webhook.statuses import PLATFORM_MESSAGE_ID_MAX, Callback, Rejected, Status, load_object

WATERMARK_ID_PREFIX = "watermark."


def watermark_id(recipient: str, watermark_ms: int) -> str:
    """The platform message id of a watermark-only status: ``watermark.{recipient}.{ms}``."""
    return f"{WATERMARK_ID_PREFIX}{recipient}.{watermark_ms}"


_MAX_MS = 10**14  # a millisecond timestamp beyond year 5000 is not one

#: Twilio MessageStatus -> inturn status; None: an intermediate status that acknowledges nothing (ignored).
TWILIO_STATUSES: dict[str, str | None] = {
    "accepted": None,
    "scheduled": None,
    "queued": None,
    "sending": None,
    "sent": "sent",
    "delivered": "delivered",
    "read": "read",
    "undelivered": "failed",
    "failed": "failed",
    "canceled": "failed",  # a scheduled message canceled before it went out: it never will
    "partially_delivered": None,  # not final: the remaining parts end in delivered or undelivered
    "receiving": None,  # inbound messages' statuses: not ours
    "received": None,
}


class _Unreadable(Exception):
    """One event among others cannot be read; ``args[0]`` says why."""


def _id_of(event: dict[str, Any], key: str) -> str:
    party = event.get(key)
    value = party.get("id") if isinstance(party, dict) else None
    if not isinstance(value, str) or not value:
        raise _Unreadable(f"{key}.id: missing or not a string")
    return value


def _millis(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _MAX_MS:
        raise _Unreadable(f"{where}: not a millisecond timestamp")
    return value


def _mid(value: Any, where: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= PLATFORM_MESSAGE_ID_MAX:
        raise _Unreadable(f"{where}: not a message id")
    return value


def _messaging_statuses(event: Any, rooms: RoomResolver) -> list[Status] | str:
    """The statuses of one ``messaging[]`` event, or the kind of an event that carries none."""
    if not isinstance(event, dict):
        raise _Unreadable("messaging event is not an object")
    delivery, read = event.get("delivery"), event.get("read")
    if delivery is None and read is None:
        message = event.get("message")
        if isinstance(message, dict):
            return "message_echo" if message.get("is_echo") else "incoming_message"
        kinds = sorted(k for k in event if k not in ("sender", "recipient", "timestamp"))
        return kinds[0] if kinds else "other"
    user = _id_of(event, "sender")  # the person our messages went to
    account = _id_of(event, "recipient")  # the Page or Instagram account
    room_id, _, _ = rooms.resolve(None, user, account)

    def status(pmid: str, kind: str, ts: int, watermark: int | None) -> Status:
        return Status(pmid, kind, ts, user, room_id, None, None, event, None, watermark)

    if delivery is not None:
        if not isinstance(delivery, dict):
            raise _Unreadable("delivery: not an object")
        watermark = _millis(delivery.get("watermark"), "delivery.watermark")
        mids = delivery.get("mids")
        if mids is not None and not isinstance(mids, list):
            raise _Unreadable("delivery.mids: not a list")
        if mids:
            return [status(_mid(m, "delivery.mids[]"), "delivered", watermark, watermark) for m in mids]
        return [status(watermark_id(user, watermark), "delivered", watermark, watermark)]
    if not isinstance(read, dict):
        raise _Unreadable("read: not an object")
    if "mid" in read:  # Instagram messaging_seen: one message
        ts = _millis(event.get("timestamp"), "timestamp")
        return [status(_mid(read["mid"], "read.mid"), "read", ts, None)]
    watermark = _millis(read.get("watermark"), "read.watermark")
    return [status(watermark_id(user, watermark), "read", watermark, watermark)]


def parse_messenger(body: bytes, rooms: RoomResolver, platform: Literal["messenger", "instagram"]) -> Callback:
    """The statuses of a Messenger (object ``page``) or Instagram (object ``instagram``) webhook body: deliveries,
    reads and seen events; other events (incoming messages, echoes, postbacks, ...) are counted in ``ignored``.
    ``SchemaError`` when the body is not such a notification for ``platform``."""
    doc = load_object(body)
    expected = "page" if platform == "messenger" else "instagram"
    if doc.get("object") != expected:
        raise SchemaError(f"object: expected {expected!r}, got {str(doc.get('object'))[:40]!r}", raw=body)
    entries = doc.get("entry")
    if not isinstance(entries, list):
        raise SchemaError("entry: not a list", raw=body)
    # Instagram's send answer is the ack (``AckKind.SYNCHRONOUS``): no status of its decides a worker's outcome.
    callback = Callback(answered_by_send=ADAPTERS[platform].ack_kind is AckKind.SYNCHRONOUS)
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise SchemaError(f"entry[{i}]: not an object", raw=body)
        events = entry.get("messaging")
        if events is None:
            callback.ignored.append("changes" if "changes" in entry else "other")
            continue
        if not isinstance(events, list):
            raise SchemaError(f"entry[{i}].messaging: not a list", raw=body)
        for event in events:
            try:
                found = _messaging_statuses(event, rooms)
            except _Unreadable as exc:
                callback.rejected.append(Rejected(str(exc), orjson.dumps(event)))
                continue
            if isinstance(found, str):
                callback.ignored.append(found)
            else:
                callback.statuses.extend(found)
    return callback


def form_params(body: bytes) -> list[tuple[str, str]]:
    """The name/value pairs of a form-encoded body, in order, blank values kept; ``SchemaError`` if it is not one."""
    try:
        return parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(body))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SchemaError(f"not a form-encoded body: {exc}", raw=body) from exc


def parse_twilio(body: bytes, url: str, rooms: RoomResolver, received_at_ms: int) -> Callback:
    """The one status of a Twilio status callback (form body) called at ``url`` (the public URL, whose query carries
    inturn's callback data). Intermediate statuses (queued, sending, ...) are ``ignored``; an unknown
    ``MessageStatus`` is a ``Rejected``. ``SchemaError`` without a MessageSid / MessageStatus."""
    params = dict(form_params(body))
    pmid = params.get("MessageSid") or params.get("SmsSid")
    if not pmid or len(pmid) > PLATFORM_MESSAGE_ID_MAX:
        raise SchemaError("MessageSid: missing or too long", raw=body)
    raw_status = params.get("MessageStatus") or params.get("SmsStatus")
    if not raw_status:
        raise SchemaError("MessageStatus: missing", raw=body)
    callback = Callback()
    if raw_status not in TWILIO_STATUSES:
        callback.rejected.append(Rejected(f"MessageStatus: unsupported value {raw_status[:40]!r}", body))
        return callback
    status = TWILIO_STATUSES[raw_status]
    if status is None:
        callback.ignored.append(raw_status)
        return callback
    data = parse_qs(urlsplit(url).query).get(CALLBACK_PARAM, [None])[0]
    recipient = params.get("To") or None
    room_id, message_id, partition = rooms.resolve(data, recipient, params.get("AccountSid"))
    code = params.get("ErrorCode") or None
    error = f"{code}: {params.get('ErrorMessage') or 'Twilio error'}" if code else None
    callback.statuses.append(
        Status(pmid, status, received_at_ms, recipient, room_id, message_id, error, params, partition)
    )
    return callback


def _port_variants(url: str) -> list[str]:
    """``url`` as given, and with its default port added or removed (Twilio signs whichever form it was given)."""
    parts = urlsplit(url)
    default = {"https": 443, "http": 80}.get(parts.scheme)
    if default is None or parts.hostname is None:
        return [url]
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    other = host if parts.port is not None else f"{host}:{default}"
    if parts.port not in (None, default):
        return [url]
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{other}" if userinfo else other
    return [url, urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))]


def verify_twilio(
    header: str | None, url: str, params: Sequence[tuple[str, str]], auth_tokens: Sequence[bytes]
) -> None:
    """Return if ``header`` is Twilio's signature of ``params`` POSTed to ``url`` with one of ``auth_tokens`` (the
    current and previous Auth Tokens during a rotation); ``SignatureError`` otherwise. Compared in constant time,
    every candidate tried (no early exit)."""
    if not header:
        raise SignatureError("missing X-Twilio-Signature header")
    given = header.strip().encode()
    matched = False
    for token in auth_tokens:
        for candidate in _port_variants(url):
            matched |= hmac.compare_digest(twilio_signature(token, candidate, params).encode(), given)
    if not matched:
        raise SignatureError("X-Twilio-Signature does not match")


def public_url(
    path_and_query: str,
    *,
    scheme: str,
    host: str | None,
    forwarded_proto: str | None = None,
    forwarded_host: str | None = None,
    public_base_url: str | None = None,
) -> str:
    """The URL the platform called, rebuilt from what reached the webhook.

    ``path_and_query``: the request target as received (``/webhooks/twilio?inturn=...``, not re-encoded).
    ``public_base_url`` (configured, e.g. ``https://hooks.example.com``) wins when set: then no header is trusted.
    Else ``X-Forwarded-Proto`` / ``X-Forwarded-Host`` (first value of each list: the proxy nearest the platform),
    which only a proxy that sets (overwrites) them makes trustworthy; else the request's scheme and Host.
    """
    if public_base_url:
        return public_base_url.rstrip("/") + path_and_query
    proto = (forwarded_proto or "").split(",")[0].strip() or scheme
    authority = (forwarded_host or "").split(",")[0].strip() or host or ""
    if not authority:
        raise ValueError("no host to rebuild the public URL from (set a public base URL)")
    return f"{proto}://{authority}{path_and_query}"
