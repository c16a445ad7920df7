"""The part of a Meta (WhatsApp Cloud API) status callback the webhook reads, as msgspec structs.

``statuses.parse_meta`` decodes a body with these first: in C, into only the fields named here (a status's
``conversation`` and ``pricing`` objects are skipped, not built). Anything else about the body, any value of
another type than the one named, and any status the typed reading cannot take whole, sends the body to the
reader over plain dicts (``statuses.parse_meta_dicts``), which answers every case, rejecting a bad status alone.
So this module decides nothing: it is a faster way to the same result for the usual callback
(``tests/webhook/test_webhook_fuzz.py`` compares the two over any value at any place).

Kept out of the compiled modules (docs/compiled.md): mypyc does not compile classes with a metaclass.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from inturn.schemas import AckStatus

PLATFORM_MESSAGE_ID_MAX = 256  # inturn.schemas.Ack.platform_message_id


class MetaStatus(msgspec.Struct):
    """``entry[].changes[].value.statuses[]``."""

    id: Annotated[str, msgspec.Meta(min_length=1, max_length=PLATFORM_MESSAGE_ID_MAX)]
    status: AckStatus
    timestamp: str | int | float
    recipient_id: str | None = None
    biz_opaque_callback_data: str | None = None
    # Read by orjson, as the reader over dicts reads it, when there (a failed status): the same title however a
    # number in it is written (orjson reads an integer beyond 64 bits as a float, msgspec as an int).
    errors: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class MetaMetadata(msgspec.Struct):
    """``value.metadata``: the business phone number the statuses are about."""

    phone_number_id: str | None = None


class MetaValue(msgspec.Struct):
    """``entry[].changes[].value``: ``messages`` is read only for whether the key is there (incoming messages)."""

    statuses: list[MetaStatus] | None = None
    metadata: MetaMetadata | None = None
    messages: Any | msgspec.UnsetType = msgspec.UNSET


class MetaChange(msgspec.Struct):
    """``entry[].changes[]``."""

    value: MetaValue
    field: str = "messages"


class MetaEntry(msgspec.Struct):
    """``entry[]``."""

    changes: list[MetaChange]


class MetaCallback(msgspec.Struct):
    """The body: ``{"object": ..., "entry": [...]}`` (``object`` is not read)."""

    entry: list[MetaEntry]


DECODER = msgspec.json.Decoder(MetaCallback)
