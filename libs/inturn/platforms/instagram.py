"""Instagram messaging: the Send API of the Instagram Platform, ``POST /{version}/{ig-id}/messages`` (or
``/me/messages``) with a bearer token.

Wire format: the same Send API body as Messenger (``recipient.id`` = the IGSID, ``message.text``), answered with
``{"recipient_id": ..., "message_id": ...}`` (Meta's Send API reference,
https://developers.facebook.com/docs/messenger-platform/reference/send-api, which covers Instagram messaging;
the host is ``graph.instagram.com`` with Instagram Login, ``graph.facebook.com`` with Facebook Login).

Acks: Instagram messaging has no delivery webhook; its webhook fields
(https://developers.facebook.com/documentation/business-messaging/instagram-messaging/webhooks) offer only
``messaging_seen`` ("a message has been read by the recipient", ``read.mid``). The send's 2xx answer with its
message id is therefore the ack: the ack kind is ``synchronous``, and ``messaging_seen`` reads are informational.

Idempotency: none offered; a re-send after a crash is a second message.
"""

from __future__ import annotations

import functools

from inturn.platforms.base import AckKind
from inturn.platforms.messenger import MessengerAdapter


class InstagramAdapter(MessengerAdapter):
    """Sends to Instagram messaging (or the platform simulator's Instagram route); the answer is the ack."""

    name = "instagram"
    ack_kind = AckKind.SYNCHRONOUS

    @property
    def _base(self) -> str:
        return self.settings.instagram_base_url.rstrip("/")

    @property
    def _version(self) -> str:
        return self.settings.instagram_api_version

    @property
    def _default_account(self) -> str:
        return self.settings.instagram_account_id or "me"

    @property
    def _messaging_type(self) -> str:
        return "RESPONSE"

    @functools.cached_property
    def _headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.settings.instagram_access_token.get_secret_value()}",
            "Content-Type": "application/json",
        }
