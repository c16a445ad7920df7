"""Messages as a producer would hand them to inturn, and acks as the webhook would publish them."""

from __future__ import annotations

from typing import Any

from inturn.schemas import Ack, AckStatus, Message, now_ms


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


def ack(
    room: str, message_id: str | None, platform_message_id: str, status: AckStatus = AckStatus.SENT, **fields: Any
) -> Ack:
    """An ack of ``room``'s message ``message_id`` (None: the platform did not echo it) sent as
    ``platform_message_id``: a WhatsApp status that happened and was received now; ``fields`` sets any other field
    of ``Ack`` (platform, platform_ts_ms, received_at_ms, recipient, watermark_ms, ...)."""
    at = now_ms()
    values: dict[str, Any] = {"platform": "whatsapp", "platform_ts_ms": at, "received_at_ms": at, **fields}
    return Ack(room_id=room, message_id=message_id, platform_message_id=platform_message_id, status=status, **values)
