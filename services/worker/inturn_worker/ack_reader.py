"""The acks reader: for every messages partition p this worker owns, it reads acks partition p.

It mirrors the group's assignment with a manual ``assign`` on a consumer of its own (no group
membership, never commits), positioned by time a little before the assignment so acks published
while the partition moved are not missed (docs/architecture.md, invariant 5).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import structlog
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from inturn.errors import SchemaError
from inturn.kafka import make_consumer
from inturn.logs import bind_work, clear_work
from inturn.metrics import worker as m
from inturn.schemas import (
    ACK_HEADER_MESSAGE_ID,
    ACK_HEADER_PLATFORM_MESSAGE_ID,
    ACK_HEADER_STATUS,
    Ack,
    DeadLetter,
    EventType,
    decode,
)
from inturn.settings.worker import WorkerSettings
from inturn_worker.acks import AckRouter, Routed
from inturn_worker.events import EventLog
from inturn_worker.partition import Partition

log = structlog.get_logger("inturn.worker.acks")


class AckRecord(Protocol):
    """What the reader reads of a consumed acks record (a confluent-kafka ``Message``, or a test's stand-in)."""

    def topic(self) -> str | None: ...

    def partition(self) -> int | None: ...

    def offset(self) -> int | None: ...

    def key(self) -> bytes | None: ...

    def value(self) -> bytes | None: ...

    def headers(self) -> list[tuple[str, str | bytes | None]] | dict[str, str | bytes | None] | None: ...


#: Positioning attempts failed in a row after which the reader replaces its Kafka client (about a second apart).
REBUILD_AFTER = 3
#: Acks taken per consume, and how long the reader rests when a consume found fewer: while messages wait for acks
#: (a platform's callbacks come tens to hundreds of milliseconds after a send: five more are little), and while none
#: does.
BATCH = 1000
POLL_S = 0.005
IDLE_POLL_S = 0.02


class AckReader:
    """Consumes the acks partitions mirroring the messages assignment and routes each ack."""

    def __init__(self, settings: WorkerSettings, router: AckRouter, events: EventLog) -> None:
        self._settings = settings
        self._router = router
        self._events = events
        self._consumer = self._new_consumer()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="acks")
        self._changes: deque[tuple[str, list[Partition], int]] = deque()
        self._catching_up: dict[int, tuple[Partition, int, int]] = {}  # partition -> (state, start, end)
        self._stopping = False
        self._retry_at = 0.0
        self._failures = 0  # positioning attempts failed in a row
        self._next: dict[int, int] = {}  # acks partition -> the offset to read next (for a rebuilt client)
        self.lookup_timeout_s = 10.0

    def _new_consumer(self) -> Consumer:
        return make_consumer(
            self._settings,
            f"{self._settings.worker_group_id}.acks.{self._settings.worker_id}",
            **{
                "auto.offset.reset": "latest",
                # Assigned by hand, it refreshes only assigned topics: left with no partition across a broker restart,
                # it kept a stale acks topic ("Local: Unknown partition") for 15 minutes. Cached metadata ages sooner.
                "metadata.max.age.ms": 15_000,
                "fetch.wait.max.ms": self._settings.worker_acks_fetch_wait_max_ms,
                "fetch.min.bytes": self._settings.worker_acks_fetch_min_bytes,
            },
        )

    def assign(self, parts: list[Partition], since_ms: int) -> None:
        """Read these partitions' acks from ``since_ms``; each is ready once read up to its end at the assignment."""
        self._router.forget_partitions({p.partition for p in parts})
        self._changes.append(("assign", parts, since_ms))

    def unassign(self, parts: list[Partition]) -> None:
        """Stop reading these partitions' acks."""
        self._changes.append(("unassign", parts, 0))

    def _apply_changes(self) -> None:
        """Apply queued (un)assignments in order; a Kafka error leaves the change queued, retried a second later."""
        if time.monotonic() < self._retry_at:
            return
        while self._changes:
            action, parts, since_ms = self._changes[0]
            try:
                if parts:
                    self._apply(action, parts, since_ms)
            except KafkaException as exc:
                self._failures += 1
                log.warning(
                    "acks_assignment_retry",
                    action=action,
                    partitions=[p.partition for p in parts],
                    error=str(exc),
                    failures=self._failures,
                )
                self._retry_at = time.monotonic() + 1.0
                if self._failures % REBUILD_AFTER == 0:
                    self._rebuild()
                else:
                    self._refresh_metadata()
                return
            self._failures = 0
            self._changes.popleft()

    def _rebuild(self) -> None:
        """Replace the client, keeping every partition it reads where it was.

        After a broker restart a client that had no partition left was seen answering every lookup with "all
        broker connections are down" for minutes while the broker served everyone else; a new client connects.
        Each partition resumes at the offset after the last ack routed from it (or where it was positioned), so
        nothing is skipped and nothing routed twice. The old client is closed on a thread of its own: a wedged
        client may take long to close, and the reader must not wait for it.
        """
        old = self._consumer
        topic = self._settings.topic_acks
        resume = [TopicPartition(topic, p, offset) for p, offset in self._next.items()]  # _next: what is assigned
        self._consumer = self._new_consumer()
        if resume:
            self._consumer.incremental_assign(resume)
        threading.Thread(target=old.close, name="acks-old-client-close", daemon=True).start()
        log.warning("acks_reader_rebuilt", partitions=[tp.partition for tp in resume], failures=self._failures)

    def _refresh_metadata(self) -> None:
        """Ask the broker for the acks topic's metadata now (the answer replaces what the client had cached)."""
        try:
            self._consumer.list_topics(self._settings.topic_acks, timeout=5)
        except KafkaException as exc:
            log.warning("acks_metadata_refresh_failed", error=str(exc))

    def _apply(self, action: str, parts: list[Partition], since_ms: int) -> None:
        topic = self._settings.topic_acks
        if action != "assign":
            self._consumer.incremental_unassign([TopicPartition(topic, p.partition) for p in parts])
            for part in parts:
                self._catching_up.pop(part.partition, None)
                self._next.pop(part.partition, None)
            return
        # Everything that can fail comes before the assignment, so a retry starts from a clean slate.
        found = self._consumer.offsets_for_times(
            [TopicPartition(topic, p.partition, since_ms) for p in parts], timeout=self.lookup_timeout_s
        )
        failed = [tp for tp in found if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)
        ends = {
            p.partition: self._consumer.get_watermark_offsets(
                TopicPartition(topic, p.partition), timeout=self.lookup_timeout_s
            )[1]
            for p in parts
        }
        # No ack at or after since_ms (offset -1): start at the end as it was just read, not at the logical
        # OFFSET_END, which librdkafka resolves only once its fetcher starts and would skip an ack published between.
        positioned = [
            TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else ends[tp.partition]) for tp in found
        ]
        self._consumer.incremental_assign(positioned)
        for tp, at in zip(found, positioned, strict=True):
            part = next(p for p in parts if p.partition == tp.partition)
            self._catching_up[tp.partition] = (part, tp.offset, ends[tp.partition])
            self._next[tp.partition] = at.offset  # where a rebuilt client resumes until an ack is read

    def _caught_up(self) -> list[Partition]:
        """Parts whose acks partition was read up to its end at the assignment."""
        if not self._catching_up:
            return []
        topic = self._settings.topic_acks
        positions = self._consumer.position([TopicPartition(topic, p) for p in self._catching_up])
        ready = []
        for tp in positions:
            part, start, end = self._catching_up[tp.partition]
            # Before its first record the position is OFFSET_INVALID: it is then still where it was assigned.
            # A start below 0 means no ack was published since the look-back: nothing to read.
            position = tp.offset if tp.offset >= 0 else start
            if start < 0 or position >= end:
                ready.append(part)
                del self._catching_up[tp.partition]
        return ready

    def _step(self) -> tuple[list[Message], list[Partition]]:
        """Apply queued (un)assignments (their offset look-ups block), then take what has arrived."""
        self._apply_changes()
        return self._take()

    def _take(self) -> tuple[list[Message], list[Partition]]:
        """The acks that have arrived, without waiting (in librdkafka's memory), and the parts now caught up."""
        return self._consumer.consume(num_messages=BATCH, timeout=0), self._caught_up()

    async def run(self) -> None:
        """Read and route acks until ``stop``.

        The reader polls from the event loop: a consume that does not wait costs a few microseconds, where a
        blocking one on a thread of its own cost a hop between threads per batch and the GIL back and forth. Only
        the (un)assignments, whose offset look-ups wait on the broker, go to the reader's thread."""
        loop = asyncio.get_running_loop()
        while not self._stopping:
            if self._changes and time.monotonic() >= self._retry_at:
                await loop.run_in_executor(self._executor, self._apply_changes)
                if self._stopping:
                    return
            batch, ready = self._take()
            for record in batch:
                self._handle(record)
            clear_work()  # the last ack's context is not what the reader logs next
            for part in ready:
                part.acks_caught_up()  # after the batch above was routed
            # A full batch: more is there. Otherwise look again shortly while a message waits for its ack, less often
            # while none does (each wake-up of an idle process costs CPU time; an ack no send waits for can wait).
            await asyncio.sleep(0 if len(batch) == BATCH else POLL_S if self._router.waiting else IDLE_POLL_S)

    def _handle(self, record: Message) -> None:
        """Route one consumed record and remember where its partition goes on."""
        if record.error() is not None:
            log.warning("acks_consume_error", error=str(record.error()))
            return
        self._route(record)
        partition = record.partition()
        if partition in self._next:
            self._next[partition] = (record.offset() or 0) + 1

    def _route(self, record: AckRecord) -> None:
        if self._settled(record):
            return
        partition, offset = record.partition(), record.offset()  # what is logged of this ack says where it was read
        try:
            ack = decode(Ack, record.value())
        except SchemaError as exc:
            bind_work(partition=partition, ack_offset=offset)
            log.warning("ack_undecodable", reason=exc.reason)
            letter = DeadLetter.of(
                "worker",
                f"undecodable ack: {exc.reason}",
                record.value() or b"",
                topic=record.topic(),
                partition=partition,
                offset=offset,
            )
            self._events.dead_letter(letter, None)
            return
        bind_work(partition=partition, ack_offset=offset, room_id=ack.room_id, message_id=ack.message_id)  # one set
        routed, finished = self._router.route(ack)
        if routed is Routed.LATE and finished is not None:
            m.for_platform(ack.platform).late_acks.inc()
            self._events.emit(
                EventType.LATE_ACK,
                ack.room_id,
                finished.message_id,
                ack.platform,
                finished.partition,
                finished.offset,
                acked_at_ms=ack.received_at_ms,
                platform_message_id=ack.platform_message_id,
                detail=ack.status.value,
            )
        elif routed is Routed.DUPLICATE:
            m.for_platform(ack.platform).duplicate_acks.inc()

    def _settled(self, record: AckRecord) -> bool:
        """Whether the record's headers (set by the webhook) show a status that can no longer change its message's
        outcome: then it is counted as a duplicate without being decoded. Records without them are decoded."""
        headers = record.headers()
        if not headers:
            return False
        status = message_id = platform_message_id = None
        # A consumed record's headers are a list of pairs (the client's type also allows a dict, for producing).
        for name, value in headers.items() if isinstance(headers, dict) else headers:
            if name == ACK_HEADER_STATUS:
                status = value
            elif name == ACK_HEADER_MESSAGE_ID:
                message_id = value
            elif name == ACK_HEADER_PLATFORM_MESSAGE_ID:
                platform_message_id = value
        if status is None:
            return False
        if message_id:  # by room and message id; the platform's id tells which copy of the message it is about
            platform = self._router.settled(_text(record.key()) or "", _text(message_id), _text(platform_message_id))
        else:  # matched by the platform's id alone (the room is not read)
            platform = self._router.settled("", None, _text(platform_message_id))
        if platform is None:
            return False
        m.for_platform(platform).duplicate_acks.inc()
        return True

    async def close(self) -> None:
        """Stop reading and close the consumer."""
        self._stopping = True
        await asyncio.get_running_loop().run_in_executor(self._executor, self._consumer.close)
        self._executor.shutdown(wait=False)


def _text(value: str | bytes | None) -> str | None:
    """A Kafka key or header value as text (UTF-8 bytes on the wire); None when absent or empty."""
    if not value:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else value
