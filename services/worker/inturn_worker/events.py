"""Everything the worker records: events on ``inturn.events`` and dead letters on ``inturn.dlq``.

``confirm`` waits until every record produced before it was called is in Kafka — not until the
producer is idle, which under steady load it never is. It counts per partition: the producer is
idempotent, so Kafka confirms each partition's records in the order they were produced, and the
partition is chosen here. A message's events go to the events partition of its own messages partition's
number (modulo the events topic's count): that is murmur2 of the room, as for inturn's producers, unless the
messages were produced with another partitioner; either way a room's events stay in one partition, and a new owner
of messages partition p finds their terminal events in events partition p (``inturn_worker.ends``). Dead letters
go by murmur2 of their key. The
checkpoint calls ``confirm`` before writing cursors and offsets, so nothing is marked done before
its terminal event is safe. A record Kafka gave up on is produced again: an event is never dropped.

Delivery callbacks run on the event loop's thread only (``poll`` and ``confirm`` are called there),
so the counters need no lock and no other thread competes for the GIL on every delivery.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

import orjson
import structlog
from confluent_kafka import KafkaError, Message, Producer

from inturn.kafka import partition_for
from inturn.schemas import SCHEMA_VERSION, DeadLetter, EventType, OrderingMode, encode, now_ms
from inturn.settings.worker import WorkerSettings

log = structlog.get_logger("inturn.worker.events")

#: The longest a checkpoint round's ``confirm`` blocks the loop to have the lingering events sent at once.
FLUSH_S = 0.005


class EventLog:
    """Produces events and dead letters and knows which of them Kafka confirmed."""

    def __init__(self, producer: Producer, settings: WorkerSettings, partitions: dict[str, int]) -> None:
        self._producer = producer
        self._events_topic = settings.topic_events
        self._dlq_topic = settings.topic_dlq
        self._partitions = partitions  # topic -> partition count
        self._worker_id = settings.worker_id
        self._mode = OrderingMode(settings.worker_mode)
        self._produced: defaultdict[tuple[str, int], int] = defaultdict(int)
        self._delivered: defaultdict[tuple[str, int], int] = defaultdict(int)
        self._resending = 0
        self.redelivered = 0
        self._key_partitions: dict[tuple[str, str], int] = {}  # (topic, key) -> partition, bounded below

    def emit(
        self,
        type_: EventType,
        room_id: str,
        message_id: str,
        platform: str,
        partition: int,
        offset: int,
        *,
        attempt: int = 1,
        created_at_ms: int | None = None,
        consumed_at_ms: int | None = None,
        sent_at_ms: int | None = None,
        acked_at_ms: int | None = None,
        platform_message_id: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Record one event of one message.

        The record is the ``Event`` schema's JSON, written from one dict literal: every field the worker passes
        was checked when its message was consumed, and building and dumping a model per event cost more than
        the rest of the event's path (tests decode these records with the model, strictly, and check that
        this writes every field of it).
        """
        record = {
            "v": SCHEMA_VERSION,
            "type": type_,
            "room_id": room_id,
            "message_id": message_id,
            "platform": platform,
            "partition": partition,
            "offset": offset,
            "attempt": attempt,
            "worker_id": self._worker_id,
            "mode": self._mode,
            "ts_ms": now_ms(),
            "created_at_ms": created_at_ms,
            "consumed_at_ms": consumed_at_ms,
            "sent_at_ms": sent_at_ms,
            "acked_at_ms": acked_at_ms,
            "platform_message_id": platform_message_id,
            "detail": detail,
        }
        events = self._events_topic
        self._produce(events, room_id, orjson.dumps(record), partition % self._partitions[events])

    def dead_letter(self, letter: DeadLetter, key: str | None) -> None:
        """Put a dead letter on the dead-letter topic."""
        self._produce(self._dlq_topic, key, encode(letter))

    def _produce(self, topic: str, key: str | None, value: bytes, partition: int | None = None) -> None:
        if partition is None:
            partition = self._partition(topic, key) if key is not None else 0
        self._produced[(topic, partition)] += 1
        self._send(topic, key, value, partition, self._on_delivery)

    def _partition(self, topic: str, key: str) -> int:
        """The partition of ``key`` by murmur2 (remembered: a room's dead letters may come one after another)."""
        cached = self._key_partitions.get((topic, key))
        if cached is None:
            if len(self._key_partitions) >= 200_000:
                self._key_partitions.clear()
            cached = self._key_partitions[(topic, key)] = partition_for(key, self._partitions[topic])
        return cached

    def _send(self, topic: str, key: str | bytes | None, value: bytes, partition: int, callback: Any) -> None:
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, partition=partition, on_delivery=callback)
            except BufferError:
                # The local queue is full: serve deliveries until there is room.
                self._producer.poll(0.1)
            else:
                return

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._resending += 1
            self._resend(err, msg)
            return
        self._delivered[(msg.topic() or "", msg.partition() or 0)] += 1

    def _on_resent(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._resend(err, msg)
            return
        self._resending -= 1
        self._delivered[(msg.topic() or "", msg.partition() or 0)] += 1

    def _resend(self, err: KafkaError, msg: Message) -> None:
        """Kafka gave up on a record (after message.timeout.ms): produce it again rather than lose it."""
        self.redelivered += 1
        log.warning("event_redelivered", topic=msg.topic(), error=str(err))
        self._send(msg.topic() or "", msg.key(), msg.value() or b"", msg.partition() or 0, self._on_resent)

    def poll(self) -> None:
        """Serve delivery callbacks without blocking."""
        self._producer.poll(0)

    def _confirmed(self, snapshot: dict[tuple[str, int], int]) -> bool:
        delivered = self._delivered
        return self._resending == 0 and all(delivered[key] >= count for key, count in snapshot.items())

    async def confirm(self, wait_s: float, hurry: bool = False) -> bool:
        """Wait up to ``wait_s`` until every record produced so far is confirmed; False if that did not happen.

        ``hurry``: a room waits for this (after an ack timeout or a dead letter), so the events the producer holds
        back to send in fewer requests (it lingers 50 ms) go out at once: librdkafka ignores the linger only while
        a ``flush`` is under way, so each turn flushes for at most FLUSH_S (about a broker round trip, the loop
        blocked meanwhile) instead of only serving delivery reports."""
        snapshot = dict(self._produced)
        deadline = time.monotonic() + wait_s
        while True:
            if hurry:
                self._producer.flush(FLUSH_S)  # serves delivery reports as poll does
            else:
                self._producer.poll(0)
            if self._confirmed(snapshot):
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.002)
