"""Platform adapters: how a message becomes an HTTP send on one messaging platform.

Adding a platform is one file here with a class implementing ``PlatformAdapter`` and one line in
``ADAPTERS``. Each adapter owns its own connection pool (``transport.HttpTransport``, a bulkhead: one
platform's slowness cannot take another's connections).
"""

from __future__ import annotations

from inturn.platforms.base import PlatformAdapter, PreparedSend, SendResult
from inturn.platforms.generic import GenericAdapter
from inturn.platforms.whatsapp import WhatsAppAdapter

ADAPTERS: dict[str, type[PlatformAdapter]] = {
    WhatsAppAdapter.name: WhatsAppAdapter,
    GenericAdapter.name: GenericAdapter,
}

__all__ = ["ADAPTERS", "GenericAdapter", "PlatformAdapter", "PreparedSend", "SendResult", "WhatsAppAdapter"]
