"""A Pub/Sub message, from either pull or push, turned into inturn's ``Message`` or found poison.

Two publish formats (docs/bridge.md):

- default: ``data`` is a ``Message`` as JSON and the ordering key is its ``room_id``;
- ``INTURN_BRIDGE_ROOM_ATTRIBUTE`` set: the room is that attribute, ``platform`` and ``recipient``
  (and optionally ``message_id``, ``account``, ``created_at_ms``) are attributes, and ``data`` is
  the platform payload as a JSON object; the other attributes are kept in ``Message.attributes``.

Either way the Pub/Sub message id is kept in ``Message.attributes["pubsub_message_id"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import msgspec
import orjson

from inturn.errors import SchemaError
from inturn.schemas import Message, decode, validate
from inturn.settings.bridge import BridgeSettings

PUBSUB_ID_ATTRIBUTE = "pubsub_message_id"
#: Attributes that become Message fields in attribute mode (not copied into Message.attributes).
_FIELD_ATTRIBUTES = ("message_id", "platform", "recipient", "account", "created_at_ms")


@dataclass(frozen=True)
class PubsubRecord:
    """The parts of a Pub/Sub message the bridge uses, whichever way it arrived."""

    message_id: str
    data: bytes
    attributes: Mapping[str, str] = field(default_factory=dict)
    ordering_key: str = ""
    publish_time_ms: int | None = None


class PoisonKind(StrEnum):
    """Why a Pub/Sub message cannot become a Message (the ``kind`` label of the dead-letter metric)."""

    NO_ROOM = "no_room"
    TOO_LARGE = "too_large"
    UNDECODABLE = "undecodable"
    ROOM_MISMATCH = "room_mismatch"


@dataclass(frozen=True)
class Poison:
    """A message that goes to the dead-letter topic instead, with the reason."""

    kind: PoisonKind
    reason: str
    room_id: str | None = None


def room_of(record: PubsubRecord, settings: BridgeSettings) -> str:
    """The room (and Kafka key) of ``record``: the configured attribute, else the ordering key ('' if none)."""
    if settings.bridge_room_attribute:
        return record.attributes.get(settings.bridge_room_attribute, "")
    return record.ordering_key


def to_message(record: PubsubRecord, settings: BridgeSettings) -> Message | Poison:
    """The ``Message`` ``record`` carries, or why it is poison. Never raises."""
    if len(record.data) > settings.bridge_max_message_bytes:
        return Poison(
            PoisonKind.TOO_LARGE,
            f"data of {len(record.data)} bytes exceeds the limit of {settings.bridge_max_message_bytes} "
            "(INTURN_BRIDGE_MAX_MESSAGE_BYTES)",
            room_of(record, settings) or None,
        )
    room = room_of(record, settings)
    if not room:
        where = (
            f"attribute {settings.bridge_room_attribute!r}"
            if settings.bridge_room_attribute
            else "ordering key (publish with ordering_key = room_id)"
        )
        return Poison(PoisonKind.NO_ROOM, f"no room: the message has no {where}")
    if settings.bridge_room_attribute:
        return _from_attributes(record, room)
    return _from_message_json(record, room)


def _from_message_json(record: PubsubRecord, room: str) -> Message | Poison:
    try:
        message = decode(Message, record.data)
    except SchemaError as exc:
        return Poison(PoisonKind.UNDECODABLE, exc.reason, room)
    if message.room_id != room:
        # Pub/Sub orders by ordering key; a message keyed by another room would be ordered with the wrong one.
        return Poison(
            PoisonKind.ROOM_MISMATCH,
            f"room_id {message.room_id!r} differs from the ordering key {room!r}",
            room,
        )
    return msgspec.structs.replace(message, attributes={**message.attributes, PUBSUB_ID_ATTRIBUTE: record.message_id})


def _from_attributes(record: PubsubRecord, room: str) -> Message | Poison:
    try:
        payload = orjson.loads(record.data)
    except orjson.JSONDecodeError as exc:
        return Poison(PoisonKind.UNDECODABLE, f"data is not JSON: {exc}", room)
    if not isinstance(payload, dict):
        return Poison(PoisonKind.UNDECODABLE, "data is not a JSON object (the platform payload)", room)
    attrs = record.attributes
    kept = {k: v for k, v in attrs.items() if k not in _FIELD_ATTRIBUTES}
    kept[PUBSUB_ID_ATTRIBUTE] = record.message_id
    try:
        created = attrs.get("created_at_ms") or record.publish_time_ms or 0
        return validate(
            Message,
            {
                "room_id": room,
                "message_id": attrs.get("message_id") or record.message_id,
                "platform": attrs.get("platform"),
                "account": attrs.get("account"),
                "recipient": attrs.get("recipient"),
                "payload": payload,
                "created_at_ms": created,
                "attributes": kept,
            },
        )
    except SchemaError as exc:
        return Poison(PoisonKind.UNDECODABLE, exc.reason, room)
