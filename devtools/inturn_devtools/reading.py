"""Reading a Kafka topic back, for tests and benchmarks: every partition from the beginning, records kept.

The one reader of the tooling; it waits through ``inturn_devtools.waiting``, so a read that never completes
fails with what it was waiting for and how many records it had.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TopicPartition

from inturn.kafka import make_consumer
from inturn.settings import KafkaSettings
from inturn_devtools.waiting import wait_until


def _headers(raw: Any) -> dict[str, bytes]:
    """A record's headers as a dict (librdkafka gives a list of (name, value) pairs, or None)."""
    return {str(name): value.encode() if isinstance(value, str) else bytes(value or b"") for name, value in raw or []}


@dataclass(frozen=True)
class Record:
    """One record read back from Kafka."""

    key: str | None
    partition: int
    offset: int
    value: bytes
    headers: dict[str, bytes]


class TopicReader:
    """Reads every partition of one topic from the beginning, accumulating ``records``."""

    def __init__(self, settings: KafkaSettings, topic: str) -> None:
        self.topic = topic
        self.records: list[Record] = []
        self._consumer = make_consumer(settings, f"reader-{topic}-{time.monotonic_ns()}")
        partitions = self._consumer.list_topics(topic, timeout=10).topics[topic].partitions
        if not partitions:  # an unknown topic would otherwise read as an empty one
            self._consumer.close()
            raise LookupError(f"topic {topic} has no partitions (does it exist?)")
        self._consumer.assign([TopicPartition(topic, p, 0) for p in sorted(partitions)])

    def poll(self, seconds: float = 0.2) -> list[Record]:
        """Read what is there now (waiting up to ``seconds``); returns the new records."""
        new = []
        for msg in self._consumer.consume(1000, seconds):
            if msg.error() is not None:
                continue  # partition EOF and the like; the reader only collects records
            key = msg.key()
            new.append(
                Record(
                    key.decode() if key is not None else None,
                    msg.partition() or 0,
                    msg.offset() or 0,
                    msg.value() or b"",
                    _headers(msg.headers()),
                )
            )
        self.records.extend(new)
        return new

    def until(self, condition: Callable[[list[Record]], bool], within: float, what: str) -> list[Record]:
        """Read until ``condition(records)`` holds; ``TimeoutError`` after ``within`` seconds."""

        def holds() -> bool:
            if condition(self.records):
                return True
            self.poll()
            return condition(self.records)

        wait_until(holds, within, lambda: f"{what} on {self.topic} (have {len(self.records)} records)", every=0)
        return self.records

    def at_least(self, count: int, within: float = 20.0) -> list[Record]:
        """Read until ``count`` records arrived; returns every record read (possibly more than ``count``)."""
        return self.until(lambda records: len(records) >= count, within, f"{count} records")

    def settle(self, quiet: float, within: float, done: int | None = None) -> list[Record]:
        """Read until nothing new came for ``quiet`` seconds (or ``done`` records arrived)."""
        last_new = time.monotonic()

        def settled() -> bool:
            nonlocal last_new
            if done is not None and len(self.records) >= done:
                return True
            if self.poll(0.2):
                last_new = time.monotonic()
            return time.monotonic() - last_new >= quiet

        wait_until(settled, within, f"{self.topic} to go quiet for {quiet}s (records kept coming)", every=0)
        return self.records

    def to_end(self, within: float = 120.0) -> list[Record]:
        """Read every partition up to its end as of now (its high watermark); returns every record read."""
        ends = {
            tp.partition: self._consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in self._consumer.assignment()
        }

        reached: dict[int, int] = {}

        def note(records: list[Record]) -> None:
            for record in records:
                reached[record.partition] = max(reached.get(record.partition, 0), record.offset + 1)

        note(self.records)

        def at_end() -> bool:
            if all(reached.get(p, 0) >= end for p, end in ends.items()):
                return True
            note(self.poll(1.0))
            return False

        wait_until(at_end, within, f"{self.topic} read to its end {ends}", every=0)
        return self.records

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()


@contextmanager
def reading(settings: KafkaSettings, topic: str) -> Iterator[TopicReader]:
    """A ``TopicReader`` closed on exit."""
    reader = TopicReader(settings, topic)
    try:
        yield reader
    finally:
        reader.close()
