"""The records inturn writes to Kafka: messages, acks, events and dead letters.

Every record is JSON with a version field ``v``. Timestamps are integer milliseconds since the
Unix epoch (``*_ms``): cheap to encode, exact, and what the Spark reports compute with.
Decoding never raises anything but ``SchemaError``, whose ``reason`` is one line naming the field.
"""

from __future__ import annotations

import base64
import time
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

import orjson
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inturn.errors import SchemaError

SCHEMA_VERSION = 1  # the ``v`` of every record written by this version

RoomId = Annotated[str, Field(min_length=1, max_length=256)]
MessageId = Annotated[str, Field(min_length=1, max_length=128)]
# A message's ids are stored in PostgreSQL (room cursors, dead letters, blocked rooms), whose text cannot hold
# U+0000: one message carrying it would fail every checkpoint after it. Such a message is refused at decoding
# and dead-lettered like any other undecodable message.
_STORABLE = r"^[^\x00]+$"
StoredRoomId = Annotated[RoomId, Field(pattern=_STORABLE)]
StoredMessageId = Annotated[MessageId, Field(pattern=_STORABLE)]
PlatformName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_\-]+$")]


def now_ms() -> int:
    """Wall-clock time in integer milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", str_strip_whitespace=False)


class Message(_Record):
    """An outbound chat message for one room, as produced to ``inturn.messages`` (key = room_id)."""

    v: Literal[1] = 1
    room_id: StoredRoomId = Field(description="Any text but U+0000 (NUL), 1-256 characters.")
    message_id: StoredMessageId = Field(
        description="Unique per message; the platform idempotency key. Any text but U+0000 (NUL), 1-128 characters."
    )
    platform: PlatformName = Field(description="Which platform adapter sends it (e.g. 'whatsapp', 'generic').")
    account: str | None = Field(None, max_length=128, description="Platform account (WhatsApp phone_number_id).")
    recipient: str = Field(min_length=1, max_length=256, description="Platform recipient (e.g. wa_id).")
    payload: dict[str, Any] = Field(description="Platform message body (e.g. {'type':'text','text':{...}}).")
    created_at_ms: int = Field(ge=0, description="When the chat backend created the message.")
    not_before_ms: int | None = Field(None, ge=0, description="Do not send before this time.")
    attributes: dict[str, str] = Field(default_factory=dict, description="Origin metadata (e.g. pubsub id).")


class AckStatus(StrEnum):
    """Platform delivery statuses; ``sent`` is the one that releases the next message."""

    SENT = "sent"
    DELIVERED = "delivered"
    READ = "read"
    FAILED = "failed"


class Ack(_Record):
    """A platform status callback routed to the room's partition of ``inturn.acks`` (key = room_id)."""

    v: Literal[1] = 1
    room_id: RoomId
    message_id: MessageId | None = Field(
        None,
        description="inturn's message id when the platform echoed it (callback data); else match by "
        "platform_message_id.",
    )
    platform: PlatformName
    platform_message_id: str = Field(min_length=1, max_length=256)
    status: AckStatus
    platform_ts_ms: int = Field(ge=0, description="The platform's own timestamp of the status.")
    received_at_ms: int = Field(ge=0, description="When the webhook received the callback.")
    recipient: str | None = None
    error: str | None = Field(None, description="The platform's error title for 'failed' statuses.")


#: Kafka headers the webhook sets on every ack record (values are UTF-8 bytes). With them the worker can tell what
#: an ack is about without decoding its value, and skip statuses that can no longer change a message's outcome.
ACK_HEADER_STATUS = "inturn-status"  # the AckStatus value: sent, delivered, read, failed
ACK_HEADER_MESSAGE_ID = "inturn-message-id"  # inturn's message id, when the platform echoed it (else absent)
ACK_HEADER_PLATFORM_MESSAGE_ID = "inturn-platform-message-id"  # the platform's message id


class EventType(StrEnum):
    """Everything the worker records on ``inturn.events``."""

    DISPATCHED = "dispatched"  # the platform accepted the send (HTTP 2xx)
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


class Event(_Record):
    """One outcome or step of one message, as written to ``inturn.events`` (key = room_id)."""

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


class DeadLetter(_Record):
    """A record that could not be handled, kept whole with the reason on ``inturn.dlq``."""

    v: Literal[1] = 1
    source: Literal["worker", "webhook", "bridge"]
    reason: str
    ts_ms: int
    room_id: str | None = None
    message_id: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    raw_b64: str = Field(description="The original bytes, base64: nothing is lost.")

    @classmethod
    def of(cls, source: Literal["worker", "webhook", "bridge"], reason: str, raw: bytes, **kw: Any) -> DeadLetter:
        """A dead letter for ``raw`` with ``reason``, stamped now."""
        return cls(source=source, reason=reason, ts_ms=now_ms(), raw_b64=base64.b64encode(raw).decode(), **kw)

    def raw(self) -> bytes:
        """The original bytes."""
        return base64.b64decode(self.raw_b64)


R = TypeVar("R", bound=_Record)


def encode(record: _Record) -> bytes:
    """The record as compact JSON bytes."""
    return pydantic_core.to_json(record)


def decode(cls: type[R], raw: bytes | None) -> R:
    """Parse and validate ``raw`` as ``cls``; ``SchemaError`` with a one-line reason otherwise."""
    if raw is None:
        raise SchemaError("empty record (no value)", raw=raw)
    try:
        return cls.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise SchemaError(f"{cls.__name__}: {where}: {first['msg']}{more}", raw=raw) from exc


# --- Routing data the worker attaches to a send and the webhook reads back from a status -----------


def encode_callback_data(room_id: str, message_id: str) -> str:
    """What the worker puts in WhatsApp's ``biz_opaque_callback_data`` (max 512 characters)."""
    return orjson.dumps({"r": room_id, "m": message_id}).decode()


def decode_callback_data(data: str | None) -> tuple[str, str] | None:
    """(room_id, message_id) from ``biz_opaque_callback_data``, or None when it is not ours."""
    if not data:
        return None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    room, msg = obj.get("r"), obj.get("m")
    if isinstance(room, str) and isinstance(msg, str) and room and msg:
        return room, msg
    return None
