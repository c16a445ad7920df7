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

from inturn.platforms.base import AckKind, bearer
from inturn.platforms.messenger import GraphSend, MessengerAdapter


class InstagramAdapter(MessengerAdapter):
    """Sends to Instagram messaging (or the platform simulator's Instagram route); the answer is the ack."""

    name = "instagram"
    ack_kind = AckKind.SYNCHRONOUS

    @functools.cached_property
    def _graph(self) -> GraphSend:
        s = self.settings
        api = f"{s.instagram_base_url.rstrip('/')}/{s.instagram_api_version}"
        return GraphSend(api, s.instagram_account_id or "me", "RESPONSE", bearer(s.instagram_access_token))
