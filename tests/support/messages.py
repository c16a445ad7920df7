"""Messages as a producer would hand them to inturn."""

from __future__ import annotations

from typing import Any

from inturn.schemas import Message, now_ms


def text_message(
    room: str,
    message_id: str,
    *,
    platform: str = "whatsapp",
    recipient: str | None = None,
    body: str | None = None,
    **fields: Any,
) -> Message:
    """A text message of ``room`` (recipient: the room's name unless given; body: the message id unless given),
    created now; ``fields`` sets any other field of ``Message`` (account, not_before_ms, created_at_ms, ...)."""
    values: dict[str, Any] = {
        "room_id": room,
        "message_id": message_id,
        "platform": platform,
        "recipient": recipient or room,
        "payload": {"type": "text", "text": {"body": message_id if body is None else body}},
        "created_at_ms": now_ms(),
        **fields,
    }
    return Message(**values)
