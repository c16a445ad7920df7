"""The ends reader: what a new owner of a messages partition reads back from the events topic before its first send.

A room's cursor in PostgreSQL says which of its messages are done; so do their terminal events on Kafka. A restore
of PostgreSQL from an older copy, or a failover to a replica that is behind, loses the newest cursors. The acks read
back over the look-back (``ack_reader``) still show which messages of the lost window were acked, but a message that
ended by ack timeout or as a dead letter has no ack: only its cursor and its terminal event say it is done. Without
this read, a new owner sent such messages again after newer ones of their room (docs/reliability.md, problem 15).

For every messages partition p it is given, it reads events partition p (modulo the events topic's count; the worker
writes a message's events there, ``EventLog.emit``) from the look-back to its end at the assignment, once, and hands
the partition each room's newest offset a terminal event records (``Partition.ends_read``: its cursors become the
newer of the two). The partition admits no send before that. Events older than the look-back are not read: a store
that went back further than ``INTURN_WORKER_ACK_LOOKBACK_MS`` may still see such messages sent again.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import msgspec
import structlog
from confluent_kafka import Consumer, KafkaException, TopicPartition

from inturn.kafka import make_consumer
from inturn.schemas import EventType
from inturn.settings.worker import WorkerSettings
from inturn_worker.partition import Partition

log = structlog.get_logger("inturn.worker.ends")

#: The events that say every message of their room up to their offset is done: a room's messages end in room order,
#: one after the other, with these. Not a dead letter: an undecodable record is dead-lettered at intake, under the
#: room its key names, while that room's earlier messages may still be waiting (a dead letter of a room's own turn
#: left last in the look-back may be tried once more, in order). Not a skip, which leaves a cursor where it was.
CURSOR_EVENTS = frozenset({EventType.ACKED, EventType.ACK_TIMEOUT, EventType.SENT})
#: How long one read-back may take before it is given up and tried again, and the pause before that.
READ_TIMEOUT_S = 30.0
RETRY_S = 1.0


class ReadsBack(Protocol):
    """What an assignment tells the readers of what came before it (the acks reader, the ends reader)."""

    def assign(self, parts: list[Partition], since_ms: int) -> None: ...

    def unassign(self, parts: list[Partition]) -> None: ...


class End(msgspec.Struct):
    """The fields of an event record the read-back needs (the others are not decoded)."""

    type: str
    room_id: str
    partition: int
    offset: int


class EndsReader:
    """Reads back the terminal events of newly assigned partitions, beside the acks reader it passes assignments on
    to."""

    def __init__(self, settings: WorkerSettings, events_partitions: int, acks: ReadsBack) -> None:
        self._settings = settings
        self._count = max(1, events_partitions)
        self._acks = acks
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="ends")
        self._tasks: set[asyncio.Task[None]] = set()
        self._decoder = msgspec.json.Decoder(End)
        self.timeout_s = READ_TIMEOUT_S

    def assign(self, parts: list[Partition], since_ms: int) -> None:
        """Read these partitions' acks (the acks reader) and their ends from ``since_ms``."""
        self._acks.assign(parts, since_ms)
        task = asyncio.get_running_loop().create_task(self._read(parts, since_ms), name="ends")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def unassign(self, parts: list[Partition]) -> None:
        """These partitions are this worker's no more (their ends were read once; nothing more to stop)."""
        self._acks.unassign(parts)

    async def _read(self, parts: list[Partition], since_ms: int) -> None:
        """Read the ends back until it succeeds or no partition of ``parts`` is owned any more."""
        loop = asyncio.get_running_loop()
        failures = 0
        while live := [part for part in parts if not part.gone]:
            numbers = [part.partition for part in live]
            started = time.monotonic()
            try:
                ended, records = await loop.run_in_executor(self._executor, self._read_back, numbers, since_ms)
            except (KafkaException, TimeoutError) as exc:
                failures += 1
                log.warning("ends_read_retry", partitions=numbers, error=str(exc), failures=failures)
                await asyncio.sleep(RETRY_S)
                continue
            for part in live:
                part.ends_read(ended[part.partition])
            log.info(
                "ends_read",
                partitions=numbers,
                records=records,
                rooms=sum(len(rooms) for rooms in ended.values()),
                seconds=round(time.monotonic() - started, 3),
            )
            return

    def _read_back(self, numbers: list[int], since_ms: int) -> tuple[dict[int, dict[str, int]], int]:
        """On the reader's thread: per messages partition, room -> the newest offset its terminal events record; and
        how many event records were read.

        Each read has a client of its own, closed after it: between assignments the worker holds none (a Kafka
        client's threads and buffers are a few MiB), and a try after a failure never reuses a client that may have
        been left with a stale view of the cluster (``AckReader._rebuild``). It is closed on a thread of its own, as
        a wedged client may take long to close."""
        group = f"{self._settings.worker_group_id}.ends.{self._settings.worker_id}"
        consumer = make_consumer(self._settings, group)
        try:
            return self._read_with(consumer, numbers, since_ms)
        finally:
            threading.Thread(target=consumer.close, name="ends-client-close", daemon=True).start()

    def _read_with(
        self, consumer: Consumer, numbers: list[int], since_ms: int
    ) -> tuple[dict[int, dict[str, int]], int]:
        topic = self._settings.topic_events
        wanted = sorted({number % self._count for number in numbers})
        found = consumer.offsets_for_times([TopicPartition(topic, p, since_ms) for p in wanted], timeout=10)
        failed = [tp for tp in found if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in wanted}
        # Offset -1: no event at or after since_ms.
        todo = {tp.partition: ends[tp.partition] for tp in found if 0 <= tp.offset < ends[tp.partition]}
        ended: dict[int, dict[str, int]] = {number: {} for number in numbers}
        if not todo:
            return ended, 0
        consumer.assign([tp for tp in found if tp.partition in todo])
        deadline = time.monotonic() + self.timeout_s
        records = 0
        try:
            while todo:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"events partitions {sorted(todo)} not read to their end in {self.timeout_s} s")
                for record in consumer.consume(num_messages=1000, timeout=0.5):
                    error = record.error()
                    if error is not None:
                        raise KafkaException(error)  # the whole read is tried again (``_read``)
                    records += 1
                    self._note(record.value(), ended)
                positions = consumer.position([TopicPartition(topic, p) for p in todo])
                for tp in positions:
                    if tp.offset >= todo[tp.partition]:
                        del todo[tp.partition]
        finally:
            consumer.unassign()
        return ended, records

    def _note(self, value: bytes | None, ended: dict[int, dict[str, int]]) -> None:
        """One event record: a terminal one of a partition being read moves its room's end."""
        try:
            end = self._decoder.decode(value or b"")
        except msgspec.DecodeError:
            return  # not an event of this version's shape: it ends nothing the worker could rely on
        rooms = ended.get(end.partition)
        if rooms is not None and end.type in CURSOR_EVENTS and end.offset > rooms.get(end.room_id, -1):
            rooms[end.room_id] = end.offset

    async def close(self) -> None:
        """Stop reading: cancel reads under way."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        self._executor.shutdown(wait=False)
