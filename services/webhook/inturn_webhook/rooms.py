"""Which room a platform status belongs to.

First choice: the routing data the worker attached to the send (WhatsApp's
``biz_opaque_callback_data``, see ``inturn.schemas.encode_callback_data``), which names the room
and inturn's message id. Otherwise the recipient mapping from ``INTURN_WEBHOOK_ROOM_FROM_RECIPIENT``
(a template or a JSON map) names the room, and the worker matches the ack by platform message id.
"""

from __future__ import annotations

import orjson

from inturn.schemas import decode_callback_data

ROOM_ID_MAX = 256  # inturn.schemas.RoomId
MESSAGE_ID_MAX = 128  # inturn.schemas.MessageId


class RoomResolver:
    """Finds (room_id, message_id) for a status; (None, None) when the room is unknown."""

    def __init__(self, room_from_recipient: str | None) -> None:
        self._template: str | None = None
        self._mapping: dict[str, str] | None = None
        if room_from_recipient is None:
            return
        text = room_from_recipient.strip()
        if text.startswith("{") and '"' in text:
            self._mapping = {str(k): str(v) for k, v in orjson.loads(text).items()}
        else:
            self._template = room_from_recipient

    @property
    def fallback(self) -> str:
        """How a status without inturn's callback data finds its room: "template", "mapping" or "none"."""
        if self._template is not None:
            return "template"
        return "mapping" if self._mapping is not None else "none"

    def describe(self) -> dict[str, object]:
        """How rooms are found, as the fields of the start-up log event (no recipient or room is named)."""
        fields: dict[str, object] = {"first": "callback_data", "fallback": self.fallback}
        if self._template is not None:
            fields["template"] = self._template
        if self._mapping is not None:
            fields["mapped_recipients"] = len(self._mapping)
        if self._template is None and self._mapping is None:
            fields["without_callback_data"] = "dead-lettered as unknown room (set INTURN_WEBHOOK_ROOM_FROM_RECIPIENT)"
        return fields

    def resolve(
        self, callback_data: str | None, recipient: str | None, account: str | None = None
    ) -> tuple[str | None, str | None, int | None]:
        """(room_id, message_id, partition) from the callback data, else (room_id, None, None) from the
        recipient."""
        routed = decode_callback_data(callback_data)
        if routed is not None:
            routed_room, message, partition = routed
            if len(routed_room) <= ROOM_ID_MAX and len(message) <= MESSAGE_ID_MAX:
                return routed_room, message, partition
        if recipient is None:
            return None, None, None
        room: str | None = None
        if self._mapping is not None:
            room = self._mapping.get(recipient)
        elif self._template is not None:
            room = self._template.replace("{recipient}", recipient).replace("{account}", account or "")
        if room is not None and 0 < len(room) <= ROOM_ID_MAX:
            return room, None, None
        return None, None, None
