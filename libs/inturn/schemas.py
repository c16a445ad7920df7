"""The records inturn writes to Kafka: messages, acks, events and dead letters.

Every record is JSON with a version field ``v``. Timestamps are integer milliseconds since the
Unix epoch (``*_ms``): cheap to encode, exact, and what the Spark reports compute with.
The records are msgspec structs: built by keyword (no validation at construction, like a dataclass,
but for the few text checks of ``Message`` in its ``__post_init__``), validated when decoded.
Decoding never raises anything but ``SchemaError``, whose ``reason`` is one line naming the field.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal, NamedTuple, TypeVar

import msgspec
import orjson

from inturn.errors import SchemaError

SCHEMA_VERSION = 1  # the ``v`` of every record written by this version

RoomId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
MessageId = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
# A message's ids are stored in PostgreSQL (room cursors, dead letters, blocked rooms), whose text cannot hold
# U+0000: one message carrying it would fail every checkpoint after it. Such a message is refused at decoding
# and dead-lettered like any other undecodable message. The check, and the platform name's character set, are
# done in ``__post_init__`` with string methods, not as ``Meta(pattern=...)``: msgspec runs a Python regex per
# field per decode, which was a third of a message's decoding. The reasons keep msgspec's own wording.
_STORABLE = r"^[^\x00]+$"
_PLATFORM_PATTERN = r"^[a-z0-9_\-]+$"
_PLATFORM_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
StoredRoomId = Annotated[
    str, msgspec.Meta(min_length=1, max_length=256, description="Any text but U+0000, 1-256 chars.")
]
StoredMessageId = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=128,
        description="Unique per message; the platform idempotency key. Any text but U+0000, 1-128 characters.",
    ),
]
#: An ack's platform keeps its pattern in the schema (the webhook's parser checks the same, read from it); a message's
#: is checked by ``Message.__post_init__``, one message decoded twice per send (at intake and to render it).
PlatformName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=_PLATFORM_PATTERN)]
MessagePlatformName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, description="[a-z0-9_-]+")]


def _check_storable(value: str, field: str) -> None:
    """``ValueError`` (msgspec's wording for ``_STORABLE``) when ``value`` holds U+0000. Only text is checked: a
    value of another type can only come from construction by keyword, which checks no types (decoding does)."""
    if type(value) is str and "\x00" in value:
        raise ValueError(f"Expected `str` matching regex {_STORABLE!r} - at `$.{field}`")


def _check_platform(value: str) -> None:
    """``ValueError`` (msgspec's wording for ``_PLATFORM_PATTERN``) unless ``value`` is [a-z0-9_-]+ (text only)."""
    if type(value) is str and not (
        value.isascii() and ((value.isalnum() and value.islower()) or _PLATFORM_CHARS.issuperset(value))
    ):
        raise ValueError(f"Expected `str` matching regex {_PLATFORM_PATTERN!r} - at `$.platform`")


Millis = Annotated[int, msgspec.Meta(ge=0)]


#: Tests only: milliseconds added to every reading of ``now_ms`` in this process (``INTURN_TEST_CLOCK_OFFSET_MS``,
#: applied by ``inturn.settings.load``; a production service refuses to start with it set). It puts one service's
#: wall clock minutes apart from the others' without faking the host's clock for its libraries.
_test_clock_offset_ms = 0


def set_test_clock_offset(offset_ms: int) -> None:
    """Run this process's ``now_ms`` ``offset_ms`` ahead (negative: behind) of the host's clock. Tests only."""
    global _test_clock_offset_ms
    _test_clock_offset_ms = offset_ms


def clock_offset_ms() -> int:
    """The offset ``set_test_clock_offset`` put on ``now_ms`` (0: the host's clock)."""
    return _test_clock_offset_ms


def now_ms() -> int:
    """Wall-clock time in integer milliseconds since the epoch: the one wall clock of every inturn service (plus
    the test clock offset, which is 0 outside tests)."""
    return time.time_ns() // 1_000_000 + _test_clock_offset_ms


class _Record(msgspec.Struct, frozen=True, gc=False):
    """A record: immutable, built by keyword (``kw_only`` on each); unknown fields are ignored when decoding.

    ``gc=False``: a record refers to no other record, so it can never be part of a reference cycle, and the
    garbage collector need not track the tens of thousands a worker holds.
    """


class Message(_Record, frozen=True, kw_only=True):
    """An outbound chat message for one room, as produced to ``inturn.messages`` (key = room_id)."""

    v: Literal[1] = 1
    room_id: StoredRoomId
    message_id: StoredMessageId
    platform: MessagePlatformName  # which platform adapter sends it (e.g. "whatsapp")
    account: Annotated[str, msgspec.Meta(max_length=128, description="Platform account (phone_number_id).")] | None = (
        None
    )
    recipient: Annotated[str, msgspec.Meta(min_length=1, max_length=256, description="Platform recipient (wa_id).")]
    payload: dict[str, Any]  # the platform message body (e.g. {'type':'text','text':{...}})
    created_at_ms: Millis  # when the chat backend created the message
    not_before_ms: Millis | None = None  # do not send before this time
    attributes: dict[str, str] = msgspec.field(default_factory=dict)  # origin metadata (e.g. pubsub id)

    def __post_init__(self) -> None:
        # Run by msgspec on decoding (a ValueError becomes its ValidationError) and on construction. The common case
        # is one expression (a message is decoded twice per send; the benchmarks' 1 KB message decoded in 1.15 µs so,
        # in 1.29 µs with the three calls); the checks one by one, for the error's wording, only when it fails. A value
        # of another type than str (built by keyword, which checks no types) makes the expression raise and is let
        # through by the checks, as before.
        try:
            platform = self.platform
            if (
                "\x00" not in self.room_id
                and "\x00" not in self.message_id
                and platform.isascii()
                and ((platform.isalnum() and platform.islower()) or _PLATFORM_CHARS.issuperset(platform))
            ):
                return
        except (TypeError, AttributeError):
            pass
        _check_storable(self.room_id, "room_id")
        _check_storable(self.message_id, "message_id")
        _check_platform(self.platform)


class AckStatus(StrEnum):
    """Platform delivery statuses; ``sent`` is the one that releases the next message."""

    SENT = "sent"
    DELIVERED = "delivered"
    READ = "read"
    FAILED = "failed"


class Ack(_Record, frozen=True, kw_only=True):
    """A platform status callback routed to the room's partition of ``inturn.acks`` (key = room_id)."""

    v: Literal[1] = 1
    room_id: RoomId
    # inturn's message id when the platform echoed it (callback data); else match by platform_message_id.
    message_id: MessageId | None = None
    platform: PlatformName
    platform_message_id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    status: AckStatus
    platform_ts_ms: Millis  # the platform's own timestamp of the status
    received_at_ms: Millis  # when the webhook received the callback
    recipient: str | None = None
    error: str | None = None  # the platform's error title for 'failed' statuses
    # Watermark platforms (Messenger): every message of the recipient sent at or before this platform time is
    # confirmed (``inturn.platforms.watermark_covers``); None when the ack is about its one message.
    watermark_ms: Millis | None = None


#: Kafka headers the webhook sets on every ack record (values are UTF-8 bytes). With them the worker can tell what
#: an ack is about without decoding its value, and skip statuses that can no longer change a message's outcome.
ACK_HEADER_STATUS = "inturn-status"  # the AckStatus value: sent, delivered, read, failed
ACK_HEADER_MESSAGE_ID = "inturn-message-id"  # inturn's message id, when the platform echoed it (else absent)
ACK_HEADER_PLATFORM_MESSAGE_ID = "inturn-platform-message-id"  # the platform's message id


class EventType(StrEnum):
    """Everything the worker records on ``inturn.events``: one terminal event per message, plus retries and late
    acks."""

    DISPATCHED = "dispatched"  # no longer written (the terminal event carries sent_at_ms); read in older logs
    ACKED = "acked"  # the ack arrived in time: terminal
    ACK_TIMEOUT = "ack_timeout"  # no ack in time: terminal, the room moves on
    LATE_ACK = "late_ack"  # an ack for a message that had already timed out
    RETRIED = "retried"  # a transient send failure, another attempt follows
    DEAD_LETTERED = "dead_lettered"  # permanent failure: terminal
    SKIPPED_DUPLICATE = "skipped_duplicate"  # at or below the room cursor: already done
    SENT = "sent"  # dispatched without waiting for an ack (modes other than 'ack'): terminal


#: Event types that end a message; each consumed message gets exactly one of them.
TERMINAL_EVENTS = frozenset(
    {
        EventType.ACKED,
        EventType.ACK_TIMEOUT,
        EventType.DEAD_LETTERED,
        EventType.SKIPPED_DUPLICATE,
        EventType.SENT,
    }
)


class OrderingMode(StrEnum):
    """How the worker orders sends; see docs/ordering-modes.md."""

    ACK = "ack"
    NONE = "none"
    FIXED_DELAY = "fixed-delay"
    PARTITION = "partition"


#: ``Event.detail`` of an ``acked`` event whose ack was the send's answer (a synchronous platform calls nothing back);
#: its ``acked_at_ms`` is when the answer came. The worker writes it, the report reads it.
ANSWERED = "answered"


class Event(_Record, frozen=True, kw_only=True):
    """One outcome or step of one message, as written to ``inturn.events`` (key = room_id).

    A terminal event carries the whole story of its message: when it was created, consumed and sent
    (``sent_at_ms``, None when it never was), the attempts it took and the platform's id for it.
    """

    v: Literal[1] = 1
    type: EventType
    room_id: RoomId
    message_id: MessageId
    platform: str
    partition: int
    offset: int
    attempt: int = 1
    worker_id: str
    mode: OrderingMode
    ts_ms: int
    created_at_ms: int | None = None
    consumed_at_ms: int | None = None
    sent_at_ms: int | None = None
    acked_at_ms: int | None = None
    platform_message_id: str | None = None
    detail: str | None = None


class DeadLetter(_Record, frozen=True, kw_only=True):
    """A record that could not be handled, with the reason, on ``inturn.dlq``: kept whole when it fits the topic's
    record limit, else bounded (its size, SHA-256 and first bytes; ``inturn.dead_letters``)."""

    v: Literal[1] = 1
    source: Literal["worker", "webhook", "bridge"]
    reason: str
    ts_ms: int
    room_id: str | None = None
    message_id: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    raw_b64: str  # the original bytes, base64 (only their first bytes when ``truncated``: inturn.dead_letters)
    truncated: bool = False  # too large for the dead-letter topic: raw_b64 holds the head, raw_size/raw_sha256 the rest
    raw_size: int | None = None  # the original's size in bytes, when truncated
    raw_sha256: str | None = None  # the original's SHA-256 (hex), when truncated

    @classmethod
    def of(cls, source: Literal["worker", "webhook", "bridge"], reason: str, raw: bytes, **kw: Any) -> DeadLetter:
        """A dead letter for ``raw`` with ``reason``, stamped now."""
        return cls(source=source, reason=reason, ts_ms=now_ms(), raw_b64=base64.b64encode(raw).decode(), **kw)

    def raw(self) -> bytes:
        """The original bytes (their first bytes only when ``truncated``)."""
        return base64.b64decode(self.raw_b64)


R = TypeVar("R", bound=_Record)

_ENCODER = msgspec.json.Encoder()
_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}
_AT = re.compile(r" - at `\$\.?([^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `([^`]*)`")


def encode(record: _Record) -> bytes:
    """The record as compact JSON bytes (every field written, in declaration order)."""
    return _ENCODER.encode(record)


def decode(cls: type[R], raw: bytes | None) -> R:
    """Parse and validate ``raw`` as ``cls``; ``SchemaError`` with a one-line reason otherwise."""
    if raw is None:
        raise SchemaError("empty record (no value)", raw=raw)
    decoder = _DECODERS.get(cls)
    if decoder is None:
        decoder = _DECODERS[cls] = msgspec.json.Decoder(cls)
    try:
        record: R = decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise SchemaError(_reason(cls, exc), raw=raw) from exc
    except msgspec.DecodeError as exc:
        raise SchemaError(f"{cls.__name__}: record: Invalid JSON: {exc}", raw=raw) from exc
    return record


def validate(cls: type[R], fields: Mapping[str, Any]) -> R:
    """``cls`` from plain fields (numbers given as text are converted); ``SchemaError`` like ``decode``."""
    try:
        return msgspec.convert(fields, cls, strict=False)
    except msgspec.ValidationError as exc:
        raise SchemaError(_reason(cls, exc)) from exc


def _reason(cls: type[Any], exc: msgspec.ValidationError) -> str:
    """``<Record>: <field>: <what is wrong>``, one line."""
    text = str(exc).splitlines()[0]
    at = _AT.search(text)
    where = at.group(1) if at else ""
    if at:
        text = text[: at.start()]
    missing = _MISSING.match(text)
    if missing:
        where = f"{where}.{missing.group(1)}" if where else missing.group(1)
    return f"{cls.__name__}: {where or 'record'}: {text}"


# --- Routing data the worker attaches to a send and the webhook reads back from a status -----------


#: The highest partition number callback data may name (Kafka topics have far fewer partitions).
CALLBACK_PARTITION_MAX = 99_999


class CallbackData(NamedTuple):
    """What the worker attaches to a send and the platform echoes with each status: the room, the message and
    the messages partition the worker consumed it from (the webhook publishes the ack to the same acks partition,
    whatever partitioner the message's producer used)."""

    room_id: str
    message_id: str
    partition: int | None = None


def encode_callback_data(room_id: str, message_id: str, partition: int | None = None) -> str:
    """What the worker puts in WhatsApp's ``biz_opaque_callback_data`` (max 512 characters)."""
    if partition is None:
        return orjson.dumps({"r": room_id, "m": message_id}).decode()
    return orjson.dumps({"r": room_id, "m": message_id, "p": partition}).decode()


def decode_callback_data(data: str | None) -> CallbackData | None:
    """The room, message and partition from ``biz_opaque_callback_data``, or None when it is not ours. A
    partition that is not a small non-negative integer is ignored (the ack is then routed by the room)."""
    if not data:
        return None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    room, msg, partition = obj.get("r"), obj.get("m"), obj.get("p")
    if not (isinstance(room, str) and isinstance(msg, str) and room and msg):
        return None
    if type(partition) is not int or not 0 <= partition <= CALLBACK_PARTITION_MAX:
        partition = None
    return CallbackData(room, msg, partition)
