"""The producer SDK: how a Python service puts messages on ``inturn.messages``.

``MessageProducer`` builds valid ``Message`` records, keys them by room (so a room's messages
stay on one partition, in the order they were sent), uses inturn's idempotent producer with the
Java-compatible ``murmur2_random`` partitioner, and returns a future per message that resolves
once Kafka confirmed the write::

    with MessageProducer(settings) as producer:
        message = build_message("room-42", recipient="4917012345", payload={"type": "text", ...})
        producer.send(message).result(timeout=30)   # or: await producer.send_async(message)

Order within a room is the order of ``send`` calls: the idempotent producer never reorders
or duplicates records of one partition, even when it retries.

``plan_messages`` is the workload generator behind ``inturn produce`` (rooms x messages, or an
interleaving pattern such as ``"A7 B3 A6 A5 C5 C4 B2"``, see its docstring).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Message as KafkaMessage

from inturn.errors import InturnError, KafkaClientError
from inturn.kafka import DeliveryThread, make_producer
from inturn.schemas import DeadLetter, Message, encode, now_ms, validate
from inturn.settings import KafkaSettings

Headers = list[tuple[str, str | bytes | None]]


@dataclass(frozen=True)
class Delivery:
    """Where Kafka stored a record."""

    topic: str
    partition: int
    offset: int


def build_message(
    room_id: str,
    recipient: str,
    payload: Mapping[str, Any],
    *,
    platform: str = "whatsapp",
    message_id: str | None = None,
    account: str | None = None,
    not_before_ms: int | None = None,
    attributes: Mapping[str, str] | None = None,
    created_at_ms: int | None = None,
) -> Message:
    """A validated ``Message``; ``SchemaError`` naming the field when one is out of its bounds.

    ``message_id`` defaults to a random UUID; it is the platform's idempotency key, so a caller
    that may send the same message twice should pass a stable id of its own.
    """
    return validate(
        Message,
        {
            "room_id": room_id,
            "message_id": message_id or uuid.uuid4().hex,
            "platform": platform,
            "account": account,
            "recipient": recipient,
            "payload": dict(payload),
            "created_at_ms": now_ms() if created_at_ms is None else created_at_ms,
            "not_before_ms": not_before_ms,
            "attributes": dict(attributes or {}),
        },
    )


class MessageProducer:
    """A thread-safe producer of ``Message`` records to ``settings.topic_messages`` (key = room_id).

    A background thread serves Kafka's delivery reports; each ``send`` returns a
    ``concurrent.futures.Future`` resolving to a ``Delivery`` or failing with ``KafkaClientError``.
    ``close`` (or leaving the ``with`` block) flushes what is queued.
    """

    def __init__(self, settings: KafkaSettings, **producer_overrides: Any) -> None:
        self._settings = settings
        self._producer = make_producer(settings, **producer_overrides)
        self._closed = threading.Event()
        self._deliveries = DeliveryThread(self._producer, "inturn-sdk-producer-poll")

    def send(self, message: Message, headers: Headers | None = None) -> Future[Delivery]:
        """Queue ``message`` on the messages topic, key = its room; the future resolves once Kafka has it."""
        return self._produce(self._settings.topic_messages, message.room_id, encode(message), headers)

    def send_async(self, message: Message, headers: Headers | None = None) -> asyncio.Future[Delivery]:
        """``send`` for asyncio code: an asyncio future of the running loop (call it inside one)."""
        return asyncio.wrap_future(self.send(message, headers))

    def send_dead_letter(
        self, dead_letter: DeadLetter, key: str | None = None, headers: Headers | None = None
    ) -> Future[Delivery]:
        """Queue ``dead_letter`` on the dead-letter topic (for bridges and importers: keep what did not convert)."""
        return self._produce(self._settings.topic_dlq, key, encode(dead_letter), headers)

    def _produce(self, topic: str, key: str | None, value: bytes, headers: Headers | None) -> Future[Delivery]:
        if self._closed.is_set():
            raise InturnError("MessageProducer is closed")
        future: Future[Delivery] = Future()

        def delivered(err: KafkaError | None, record: KafkaMessage) -> None:
            try:
                if err is not None:
                    future.set_exception(KafkaClientError(err))
                else:
                    future.set_result(Delivery(topic, record.partition() or 0, record.offset() or 0))
            except InvalidStateError:  # the caller cancelled the future; the record's fate is Kafka's
                pass

        while True:
            try:
                self._producer.produce(topic, value=value, key=key, headers=headers, on_delivery=delivered)
            except BufferError:
                # librdkafka's local queue is full: let deliveries drain it, then queue again.
                self._producer.poll(0.05)
                continue
            except KafkaException as exc:
                raise KafkaClientError(exc.args[0]) from exc
            return future

    def pending(self) -> int:
        """Records queued or in flight, not yet confirmed or failed."""
        return len(self._producer)

    def flush(self, timeout: float = 30.0) -> int:
        """Wait up to ``timeout`` seconds for queued records; returns how many are still not delivered."""
        return int(self._producer.flush(timeout))

    def close(self, timeout: float = 30.0) -> int:
        """Flush (up to ``timeout``), then stop; returns how many records were left undelivered."""
        if self._closed.is_set():
            return 0
        left = self.flush(timeout)
        self._closed.set()
        self._deliveries.stop()
        return left

    def __enter__(self) -> MessageProducer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# --- Workloads for `inturn produce`, tests and benchmarks -------------------------------------------

_TOKEN = re.compile(r"([A-Za-z]+)(\d+)")


@dataclass(frozen=True)
class PlannedMessage:
    """One message of a workload: its room, its number within the room, and its label."""

    room_id: str
    seq: int  # 1, 2, 3 ... : the message's position among its room's messages, in production order
    label: str  # the pattern token ("A7"), or "<room>#<seq>" without a pattern


def parse_pattern(pattern: str) -> list[tuple[str, str]]:
    """``"A7 B3 A6"`` -> ``[("A", "A7"), ("B", "B3"), ("A", "A6")]``; ``ValueError`` on a bad token.

    A token is a room name (letters) followed by a number; tokens are separated by spaces or commas.
    """
    tokens = [t for t in re.split(r"[\s,]+", pattern.strip()) if t]
    if not tokens:
        raise ValueError("the pattern is empty")
    parsed = []
    for token in tokens:
        match = _TOKEN.fullmatch(token)
        if match is None:
            raise ValueError(f"bad pattern token {token!r}: expected a room name (letters) and a number, e.g. A7")
        parsed.append((match.group(1), token))
    return parsed


def plan_messages(
    *, rooms: int | None = None, messages: int | None = None, pattern: str | None = None, room_prefix: str = "room-"
) -> Iterator[PlannedMessage]:
    """The order in which ``inturn produce`` produces messages.

    Without a pattern: ``messages`` messages over ``rooms`` rooms (``room-0001`` ...), round robin.

    With a pattern: each token is ONE message of the room its letters name (``A7`` is a message of
    ``room-A``); the sequence produced is exactly the token order, repeated from the start until
    ``messages`` messages were produced (one pass when ``messages`` is None). The number in a token
    is only a label, carried in the message's text and ``label`` attribute: it is NOT a position.
    Each room's messages are numbered 1, 2, 3 ... in production order (``seq``), and that is the
    order the worker must deliver them in: ``"A7 B3 A6 A5"`` gives room-A the messages labelled
    A7, A6, A5 with seq 1, 2, 3, and they must reach the recipient as A7, A6, A5.
    """
    seqs: dict[str, int] = {}

    def next_of(room_id: str, label: str | None) -> PlannedMessage:
        seqs[room_id] = seqs.get(room_id, 0) + 1
        return PlannedMessage(room_id, seqs[room_id], label or f"{room_id}#{seqs[room_id]}")

    if pattern is not None:
        tokens = parse_pattern(pattern)
        total = len(tokens) if messages is None else messages
        for i in range(total):
            room, token = tokens[i % len(tokens)]
            yield next_of(f"{room_prefix}{room}", token)
        return
    if rooms is None or rooms < 1 or messages is None or messages < 0:
        raise ValueError("give rooms >= 1 and messages >= 0, or a pattern")
    for i in range(messages):
        yield next_of(f"{room_prefix}{i % rooms + 1:04d}", None)


def planned_to_message(planned: PlannedMessage, run_id: str, platform: str = "whatsapp") -> Message:
    """The ``Message`` for one planned message (ids unique per ``run_id``; seq and label as attributes)."""
    # A stable fake phone number per room, distinct between rooms (the simulator orders by recipient).
    digits = int(hashlib.sha256(planned.room_id.encode()).hexdigest()[:15], 16) % 10**10
    return build_message(
        planned.room_id,
        recipient=f"1555{digits:010d}",
        payload={"type": "text", "text": {"body": f"{planned.label} (#{planned.seq} of {planned.room_id})"}},
        platform=platform,
        message_id=f"{run_id}-{planned.room_id}-{planned.seq}",
        attributes={"seq": str(planned.seq), "label": planned.label, "run": run_id},
    )
