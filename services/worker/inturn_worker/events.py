"""Everything the worker records: events on ``inturn.events`` and dead letters on ``inturn.dlq``.

Records are produced without a future each; ``confirm`` flushes the producer before cursors and
offsets are written, so nothing is marked done in PostgreSQL or Kafka before its event is safe.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from inturn.schemas import DeadLetter, Event, EventType, OrderingMode, encode, now_ms
from inturn.settings.worker import WorkerSettings


class EventLog:
    """Produces events and dead letters; counts delivery failures since the last ``confirm``."""

    def __init__(self, producer: Producer, settings: WorkerSettings) -> None:
        self._producer = producer
        self._events_topic = settings.topic_events
        self._dlq_topic = settings.topic_dlq
        self._worker_id = settings.worker_id
        self._mode = OrderingMode(settings.worker_mode)
        self._failures = 0
        self._lock = threading.Lock()

    @staticmethod
    def delivery_config() -> dict[str, Any]:
        """Producer settings that make only failed deliveries call back."""
        return {"delivery.report.only.error": True}

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        """librdkafka's delivery callback (only errors reach it, on the flushing thread)."""
        if err is not None:
            with self._lock:
                self._failures += 1

    def emit(
        self, type_: EventType, room_id: str, message_id: str, platform: str, partition: int, offset: int, **fields: Any
    ) -> None:
        """Record one event of one message."""
        event = Event(
            type=type_,
            room_id=room_id,
            message_id=message_id,
            platform=platform,
            partition=partition,
            offset=offset,
            worker_id=self._worker_id,
            mode=self._mode,
            ts_ms=now_ms(),
            **fields,
        )
        self._produce(self._events_topic, room_id, encode(event))

    def dead_letter(self, letter: DeadLetter, key: str | None) -> None:
        """Put a dead letter on the dead-letter topic."""
        self._produce(self._dlq_topic, key, encode(letter))

    def _produce(self, topic: str, key: str | None, value: bytes) -> None:
        try:
            self._producer.produce(topic, value=value, key=key, on_delivery=self.on_delivery)
        except BufferError:
            # The local queue is full: serve deliveries until there is room (bounded by message.timeout.ms).
            self._producer.poll(1.0)
            self._producer.produce(topic, value=value, key=key, on_delivery=self.on_delivery)

    def poll(self) -> None:
        """Serve delivery callbacks without blocking."""
        self._producer.poll(0)

    async def confirm(self, wait_s: float) -> bool:
        """Wait up to ``wait_s`` for everything produced so far; False if anything failed or is still queued."""
        left = await asyncio.get_running_loop().run_in_executor(None, self._producer.flush, wait_s)
        with self._lock:
            failures, self._failures = self._failures, 0
        return left == 0 and failures == 0
