"""Platform adapters: how a message becomes an HTTP send on one messaging platform.

Adding a platform is one file here with a class implementing ``PlatformAdapter`` and one line in
``ADAPTERS``. Each adapter owns its own connection pool (``transport.HttpTransport``, a bulkhead: one
platform's slowness cannot take another's connections).
"""

from __future__ import annotations

from inturn.platforms.base import AckKind, PlatformAdapter, PreparedSend, SendResult, watermark_covers
from inturn.platforms.generic import GenericAdapter
from inturn.platforms.instagram import InstagramAdapter
from inturn.platforms.messenger import MessengerAdapter
from inturn.platforms.telegram import TelegramAdapter
from inturn.platforms.transport import RequestWithdrawn
from inturn.platforms.twilio import TwilioAdapter
from inturn.platforms.whatsapp import WhatsAppAdapter

ADAPTERS: dict[str, type[PlatformAdapter]] = {
    WhatsAppAdapter.name: WhatsAppAdapter,
    GenericAdapter.name: GenericAdapter,
    MessengerAdapter.name: MessengerAdapter,
    InstagramAdapter.name: InstagramAdapter,
    TwilioAdapter.name: TwilioAdapter,
    TelegramAdapter.name: TelegramAdapter,
}

__all__ = [
    "ADAPTERS",
    "AckKind",
    "GenericAdapter",
    "InstagramAdapter",
    "MessengerAdapter",
    "PlatformAdapter",
    "PreparedSend",
    "RequestWithdrawn",
    "SendResult",
    "TelegramAdapter",
    "TwilioAdapter",
    "WhatsAppAdapter",
    "watermark_covers",
]
