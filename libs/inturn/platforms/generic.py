"""A generic JSON-over-HTTP platform: ``POST {base}/messages`` answering ``{"id": ...}``.

The message id goes in the ``Idempotency-Key`` header, so a platform that honours it drops the
re-send of an in-flight message after a crash. Acks come back through the webhook's generic
endpoint (``/webhooks/generic/{platform}``) carrying room_id and message_id, and the ``partition`` of the
send's body when the platform echoes it (the ack then reaches the worker that sent the message whatever
partitioner the message's producer used).
"""

from __future__ import annotations

import orjson

from inturn.platforms.base import AckKind, PlatformAdapter, PreparedSend, SendResult, json_body
from inturn.schemas import Message


class GenericAdapter(PlatformAdapter):
    """Sends ``{room_id, message_id, recipient, payload}`` as JSON with a bearer token."""

    name = "generic"
    ack_kind = AckKind.PER_MESSAGE  # one status per message, echoing inturn's callback data

    def prepare(self, message: Message, partition: int | None = None) -> PreparedSend:
        """Render the JSON body; the account is the message's account or 'default'. ``partition`` goes in the
        body for the platform to echo in its acks (the webhook then publishes each ack to that partition)."""
        body: dict[str, object] = {
            "room_id": message.room_id,
            "message_id": message.message_id,
            "recipient": message.recipient,
            "payload": message.payload,
        }
        if partition is not None:
            body["partition"] = partition
        return PreparedSend(
            url=f"{self.settings.generic_base_url.rstrip('/')}/messages",
            body=json_body(body),
            account=message.account or "default",
            headers={
                "Authorization": f"Bearer {self.settings.generic_token.get_secret_value()}",
                "Content-Type": "application/json",
                "Idempotency-Key": message.message_id,
            },
        )

    def parse_accepted(self, body: bytes) -> SendResult:
        """``{"id": "..."}``."""
        return SendResult(platform_message_id=str(orjson.loads(body)["id"]))
