"""Dead letters that always fit the dead-letter topic: whole when they can be, bounded when they cannot.

Kafka refuses a record larger than the producer's ``message.max.bytes`` (librdkafka's default: 1,000,000 bytes) or
the topic's ``max.message.bytes`` (for a topic created without it, the broker's ``message.max.bytes``: 1,048,588 by
default). A dead letter carries the original bytes base64-encoded (4/3 of their size) inside JSON, so a body of
more than about 740 KB cannot be kept whole: producing it would fail every time, and a producer that waits for
the dead letter before acknowledging its input (the webhook answering a platform, the bridge acking Pub/Sub) would
refuse that input forever.

``dead_letter`` builds the record every producer of dead letters (webhook, bridge, worker) puts on the topic:
the whole original when the encoded record fits within ``limit`` (``record_limit``: the smaller of the two Kafka
limits, less ``HEADROOM`` for the key, headers and the record batch's framing), else a bounded record marked
``truncated``: the original's size and SHA-256, its first ``HEAD_BYTES`` bytes and the reason, which says so.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any, Literal

import msgspec
import structlog
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
)

from inturn.schemas import DeadLetter, encode, now_ms

log = structlog.get_logger("inturn.dead_letters")

#: librdkafka's default ``message.max.bytes``: the largest record a producer sends unless configured otherwise.
PRODUCER_MESSAGE_MAX_BYTES = 1_000_000
#: Kafka's default ``message.max.bytes`` (broker), which a topic created without ``max.message.bytes`` inherits.
TOPIC_MAX_MESSAGE_BYTES = 1_048_588
#: Room left within the limit for what the record carries besides its value: key, headers, the record's and the
#: batch's framing (about 100 bytes when uncompressed; 8 KiB leaves room for headers of a few KiB).
HEADROOM = 8 * 1024
#: The first bytes of an original kept in a bounded dead letter: enough to recognise what it was.
HEAD_BYTES = 4096
#: The longest reason kept (a reason may quote the input).
REASON_MAX = 1024

Source = Literal["worker", "webhook", "bridge"]


def record_limit(
    producer_max: int = PRODUCER_MESSAGE_MAX_BYTES, topic_max: int = TOPIC_MAX_MESSAGE_BYTES, headroom: int = HEADROOM
) -> int:
    """The largest dead-letter value (encoded) that Kafka takes: the smaller limit, less ``headroom``."""
    return min(producer_max, topic_max) - headroom


#: The limit with Kafka's defaults (a producer and topic configured otherwise: ``record_limit`` with their values).
RECORD_LIMIT = record_limit()


def topic_max_message_bytes(admin: AdminClient, topic: str, timeout: float = 10.0) -> int | None:
    """The topic's ``max.message.bytes`` as the broker reports it; None when it cannot be read (the caller keeps
    the default)."""
    try:
        futures = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)], request_timeout=timeout)
        for future in futures.values():
            entries = future.result(timeout)
            entry = entries.get("max.message.bytes")
            if entry is not None and entry.value is not None:
                return int(entry.value)
    except Exception as exc:  # noqa: BLE001 - any failure to ask leaves the default limit, said in the log
        log.warning("dead_letter_limit_unknown", topic=topic, error=str(exc))
    return None


def _b64_size(size: int) -> int:
    return 4 * ((size + 2) // 3)


def _reason(reason: str) -> str:
    return reason if len(reason) <= REASON_MAX else reason[:REASON_MAX] + "..."


def dead_letter(source: Source, reason: str, raw: bytes, *, limit: int = RECORD_LIMIT, **fields: Any) -> DeadLetter:
    """The dead letter of ``raw`` with ``reason`` (``fields``: room_id, message_id, topic, partition, offset):
    whole when its encoding is at most ``limit`` bytes, else bounded (``truncated``). The original is
    base64-encoded only when it is kept whole."""
    reason = _reason(reason)
    shell = DeadLetter(source=source, reason=reason, ts_ms=now_ms(), raw_b64="", **fields)
    if len(encode(shell)) + _b64_size(len(raw)) <= limit:
        return msgspec.structs.replace(shell, raw_b64=base64.b64encode(raw).decode())
    return _bounded(shell, raw, limit)


def fitting(letter: DeadLetter, raw: bytes, limit: int = RECORD_LIMIT) -> DeadLetter:
    """``letter`` (whose original is ``raw``) as it is when it fits within ``limit``, else its bounded form."""
    if len(encode(letter)) <= limit:
        return letter
    return _bounded(msgspec.structs.replace(letter, reason=_reason(letter.reason), raw_b64=""), raw, limit)


def _bounded(shell: DeadLetter, raw: bytes, limit: int) -> DeadLetter:
    """``shell`` (raw_b64 empty) as a bounded dead letter of ``raw``."""
    head = raw[:HEAD_BYTES]
    note = f" (too large for the dead-letter topic: {len(raw)} bytes; kept its size, SHA-256 and first {len(head)})"
    letter = msgspec.structs.replace(
        shell,
        reason=shell.reason + note,
        raw_b64=base64.b64encode(head).decode(),
        truncated=True,
        raw_size=len(raw),
        raw_sha256=hashlib.sha256(raw).hexdigest(),
    )
    size = len(encode(letter))
    if size > limit:  # only with a limit below a few KiB: keep what fits of the head
        keep = max(0, (len(head) - (size - limit) * 3 // 4) - 3)
        letter = msgspec.structs.replace(letter, raw_b64=base64.b64encode(head[:keep]).decode())
    return letter
