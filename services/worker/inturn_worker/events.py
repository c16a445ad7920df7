"""Everything the worker records: events on ``inturn.events`` and dead letters on ``inturn.dlq``.

Each record gets a sequence number; ``confirm`` waits until every record produced before it was
called is in Kafka — not until the producer is idle, which under steady load it never is. The
checkpoint calls it before writing cursors and offsets, so nothing is marked done before its
terminal event is safe. A record Kafka refused is produced again: an event is never dropped.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import Any

import structlog
from confluent_kafka import KafkaError, Message, Producer

from inturn.schemas import DeadLetter, Event, EventType, OrderingMode, encode, now_ms
from inturn.settings.worker import WorkerSettings

log = structlog.get_logger("inturn.worker.events")


class EventLog:
    """Produces events and dead letters and knows which of them Kafka confirmed."""

    def __init__(self, producer: Producer, settings: WorkerSettings) -> None:
        self._producer = producer
        self._events_topic = settings.topic_events
        self._dlq_topic = settings.topic_dlq
        self._worker_id = settings.worker_id
        self._mode = OrderingMode(settings.worker_mode)
        self._seq = 0
        self._pending: deque[int] = deque()  # sequence numbers produced, oldest first
        self._done: set[int] = set()  # confirmed out of order, not yet at the head of _pending
        self._lock = threading.Lock()
        self.redelivered = 0

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
        self._seq += 1
        seq = self._seq
        with self._lock:
            self._pending.append(seq)
        self._send(topic, key, value, seq)

    def _send(self, topic: str, key: str | None, value: bytes, seq: int) -> None:
        def delivered(err: KafkaError | None, _: Message) -> None:
            if err is not None:
                # Kafka gave up on it (after message.timeout.ms): produce it again rather than lose it.
                self.redelivered += 1
                log.warning("event_redelivered", topic=topic, error=str(err))
                self._send(topic, key, value, seq)
                return
            with self._lock:
                pending = self._pending
                if pending and pending[0] == seq:
                    pending.popleft()
                    done = self._done
                    while pending and pending[0] in done:
                        done.discard(pending.popleft())
                else:
                    self._done.add(seq)

        while True:
            try:
                self._producer.produce(topic, value=value, key=key, on_delivery=delivered)
            except BufferError:
                # The local queue is full: serve deliveries until there is room.
                self._producer.poll(0.1)
            else:
                return

    def poll(self) -> None:
        """Serve delivery callbacks without blocking."""
        self._producer.poll(0)

    def _confirmed_through(self, seq: int) -> bool:
        with self._lock:
            return not self._pending or self._pending[0] > seq

    async def confirm(self, wait_s: float) -> bool:
        """Wait up to ``wait_s`` until every record produced so far is confirmed; False if that did not happen."""
        target = self._seq
        deadline = time.monotonic() + wait_s
        loop = asyncio.get_running_loop()
        while not self._confirmed_through(target):
            if time.monotonic() > deadline:
                return False
            await loop.run_in_executor(None, self._producer.poll, 0.02)
        return True
