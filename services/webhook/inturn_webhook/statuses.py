"""Platform status callbacks parsed into statuses, and statuses encoded as ``inturn.schemas.Ack`` bytes.

Parsing is plain ``orjson`` and dict access, with no model per status: a Meta callback may carry hundreds
of statuses and this is the webhook's per-status cost. ``inturn.schemas.Ack`` is a msgspec struct, validated
only when the worker decodes it, not when ``ack_bytes`` writes it; so the limits checked here
(``PLATFORM_MESSAGE_ID_MAX``, ``rooms.ROOM_ID_MAX`` and ``MESSAGE_ID_MAX``, the platform name's pattern)
are copies of its ``msgspec.Meta`` constraints, and ``tests/webhook/test_webhook_parsing.py`` compares
them with the schema's.

Two levels of bad input (both kept on the dead-letter topic, never dropped):
- the envelope (not JSON, no ``entry`` list, ...) raises ``SchemaError``: the whole body is dead-lettered;
- one bad status among good ones (unknown status value, no id, bad timestamp) is rejected alone.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from inturn.errors import SchemaError
from inturn.schemas import CALLBACK_PARTITION_MAX, AckStatus
from inturn_webhook.rooms import MESSAGE_ID_MAX, ROOM_ID_MAX, RoomResolver

PLATFORM_MESSAGE_ID_MAX = 256  # inturn.schemas.Ack.platform_message_id
ACK_STATUSES = frozenset(s.value for s in AckStatus)
PLATFORM_NAME = re.compile(r"^[a-z0-9_\-]{1,64}$")  # inturn.schemas.PlatformName
_MAX_SECONDS_DIGITS = 11  # unix seconds up to year 5138; more is not a timestamp


class _Unreadable(Exception):
    """One status (or generic ack) among others cannot be read; ``args[0]`` says why."""


@dataclass(slots=True)
class Status:
    """One delivery status of one platform message, with its room when known."""

    platform_message_id: str
    status: str
    platform_ts_ms: int
    recipient: str | None
    room_id: str | None
    message_id: str | None
    error: str | None
    source: dict[str, Any]  # the status as received, for the dead-letter topic
    partition: int | None = None  # the messages partition the worker sent it from (echoed), else route by room
    # Watermark platforms (Messenger): every message of this recipient sent at or before this platform time (ms) is
    # confirmed; None for a status about one message only.
    watermark_ms: int | None = None


@dataclass(slots=True)
class Rejected:
    """A single status that could not be read, with the reason; the rest of its request goes on."""

    reason: str
    raw: bytes


@dataclass(slots=True)
class Callback:
    """What one webhook request carried."""

    statuses: list[Status] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # kinds of changes that carry no status
    #: From a platform whose send answer is the ack (``inturn.platforms.AckKind.SYNCHRONOUS``): the worker waits for
    #: none of these statuses, so none can change its outcome.
    answered_by_send: bool = False


def timestamp_ms(value: Any) -> int | None:
    """Unix seconds ("1700000000", "1700000000.123", or a JSON number) as integer ms; None if not one."""
    if isinstance(value, str):
        whole, _, frac = value.partition(".")
        if not (whole.isascii() and whole.isdigit() and len(whole) <= _MAX_SECONDS_DIGITS):
            return None
        if frac and not (frac.isascii() and frac.isdigit()):
            return None
        return int(whole) * 1000 + (int((frac + "00")[:3]) if frac else 0)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 1000 if 0 <= value < 10**_MAX_SECONDS_DIGITS else None
    if isinstance(value, float) and math.isfinite(value) and 0 <= value < 10**_MAX_SECONDS_DIGITS:
        return round(value * 1000)
    return None


def load_object(body: bytes) -> dict[str, Any]:
    """A callback body's JSON object; ``SchemaError`` (the body is dead-lettered whole) if it is not one."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise SchemaError(f"invalid JSON: {exc}", raw=body) from exc
    if not isinstance(doc, dict):
        raise SchemaError("body is not a JSON object", raw=body)
    return doc


def _list_at(parent: dict[str, Any], key: str, where: str, body: bytes) -> list[Any]:
    value = parent.get(key)
    if not isinstance(value, list):
        raise SchemaError(f"{where}{key}: not a list", raw=body)
    return value


def _optional_str(status: dict[str, Any], key: str) -> str | None:
    value = status.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _Unreadable(f"{key}: not a string")


def _error_title(errors: Any) -> str | None:
    if not isinstance(errors, list) or not errors or not isinstance(errors[0], dict):
        return None
    first = errors[0]
    text = first.get("title") or first.get("message")
    code = first.get("code")
    if text is None and code is None:
        return None
    return f"{code}: {text}" if code is not None and text is not None else str(text if text is not None else code)


def _meta_status(raw: Any, account: str | None, rooms: RoomResolver) -> Status:
    # The per-status cost of every Meta callback: checks written out, no helper per field.
    if type(raw) is not dict:  # orjson makes plain dicts
        raise _Unreadable("status is not an object")
    pmid = raw.get("id")
    if type(pmid) is not str or not 0 < len(pmid) <= PLATFORM_MESSAGE_ID_MAX:
        raise _Unreadable("id: missing, not a string or too long")
    status = raw.get("status")
    if type(status) is not str or status not in ACK_STATUSES:  # a list or object is not hashable
        raise _Unreadable(f"status: unsupported value {status!r}")
    ts = timestamp_ms(raw.get("timestamp"))
    if ts is None:
        raise _Unreadable("timestamp: not unix seconds")
    recipient = raw.get("recipient_id")
    if recipient is not None and type(recipient) is not str:
        raise _Unreadable("recipient_id: not a string")
    data = raw.get("biz_opaque_callback_data")
    if data is not None and type(data) is not str:
        raise _Unreadable("biz_opaque_callback_data: not a string")
    room_id, message_id, partition = rooms.resolve(data, recipient, account)
    errors = raw.get("errors")
    error = None if errors is None else _error_title(errors)
    return Status(pmid, status, ts, recipient, room_id, message_id, error, raw, partition)


def parse_meta(body: bytes, rooms: RoomResolver) -> Callback:
    """The statuses of a Meta (WhatsApp Cloud API) webhook body; ``SchemaError`` if it is not one."""
    doc = load_object(body)
    callback = Callback()
    for i, entry in enumerate(_list_at(doc, "entry", "", body)):
        if not isinstance(entry, dict):
            raise SchemaError(f"entry[{i}]: not an object", raw=body)
        for j, change in enumerate(_list_at(entry, "changes", f"entry[{i}].", body)):
            value = change.get("value") if isinstance(change, dict) else None
            if not isinstance(value, dict):
                raise SchemaError(f"entry[{i}].changes[{j}].value: not an object", raw=body)
            kind = change.get("field", "messages")
            if kind != "messages":
                callback.ignored.append(str(kind))
                continue
            if "messages" in value:  # incoming messages from users: not ours
                callback.ignored.append("incoming_message")
            statuses = value.get("statuses")
            if statuses is None:
                if "messages" not in value:
                    callback.ignored.append("other")
                continue
            if not isinstance(statuses, list):
                raise SchemaError(f"entry[{i}].changes[{j}].value.statuses: not a list", raw=body)
            metadata = value.get("metadata")
            account = metadata.get("phone_number_id") if isinstance(metadata, dict) else None
            account = account if isinstance(account, str) else None
            for raw in statuses:
                try:
                    callback.statuses.append(_meta_status(raw, account, rooms))
                except _Unreadable as exc:
                    callback.rejected.append(Rejected(str(exc), orjson.dumps(raw)))
    return callback


def _generic_ack(raw: Any) -> Status:
    if not isinstance(raw, dict):
        raise _Unreadable("ack is not an object")
    room_id = raw.get("room_id")
    if not isinstance(room_id, str) or not 0 < len(room_id) <= ROOM_ID_MAX:
        raise _Unreadable("room_id: missing, not a string or too long")
    message_id = _optional_str(raw, "message_id")
    if message_id is not None and not 0 < len(message_id) <= MESSAGE_ID_MAX:
        raise _Unreadable("message_id: empty or too long")
    pmid = raw.get("platform_message_id")
    if not isinstance(pmid, str) or not 0 < len(pmid) <= PLATFORM_MESSAGE_ID_MAX:
        raise _Unreadable("platform_message_id: missing, not a string or too long")
    status = raw.get("status")
    if not isinstance(status, str) or status not in ACK_STATUSES:  # a list or object is not hashable
        raise _Unreadable(f"status: unsupported value {status!r}")
    ts = raw.get("timestamp_ms")
    if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
        raise _Unreadable("timestamp_ms: not a non-negative integer")
    recipient = _optional_str(raw, "recipient")
    partition = raw.get("partition")
    if partition is not None and (type(partition) is not int or not 0 <= partition <= CALLBACK_PARTITION_MAX):
        raise _Unreadable("partition: not a partition number")
    return Status(pmid, status, ts, recipient, room_id, message_id, _optional_str(raw, "error"), raw, partition)


def parse_generic(body: bytes, platform: str) -> Callback:
    """The acks of a generic JSON callback ``{"acks": [...]}`` from ``platform``; ``SchemaError`` if not one."""
    if not PLATFORM_NAME.match(platform):
        raise SchemaError(f"invalid platform name {platform[:80]!r}", raw=body)
    doc = load_object(body)
    callback = Callback()
    for raw in _list_at(doc, "acks", "", body):
        try:
            callback.statuses.append(_generic_ack(raw))
        except _Unreadable as exc:
            callback.rejected.append(Rejected(str(exc), orjson.dumps(raw)))
    return callback


def ack_bytes(status: Status, platform: str, received_at_ms: int) -> bytes:
    """``status`` as the JSON of an ``inturn.schemas.Ack`` (built directly: no model per status); ``watermark_ms``
    only when the status has one."""
    fields: dict[str, object] = {
        "v": 1,
        "room_id": status.room_id,
        "message_id": status.message_id,
        "platform": platform,
        "platform_message_id": status.platform_message_id,
        "status": status.status,
        "platform_ts_ms": status.platform_ts_ms,
        "received_at_ms": received_at_ms,
        "recipient": status.recipient,
        "error": status.error,
    }
    if status.watermark_ms is not None:
        fields["watermark_ms"] = status.watermark_ms
    return orjson.dumps(fields)
