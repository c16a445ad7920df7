"""Kafka client factories with inturn's non-negotiable settings, and Java's partitioner.

Producers are idempotent (``acks=all``) and use ``murmur2_random``: librdkafka's default
partitioner (``consistent_random``, CRC32) differs from Java's, and inturn needs messages and
acks of a room on the same partition number whoever produced them (docs/architecture.md, invariant 5).
Consumers never auto-commit and never auto-store offsets: offsets are stored after the work.
Clients are built on demand, never at import time.

Every client is given ``client_logger()`` (confluent-kafka's ``logger`` setting): librdkafka's own log lines
(``%3|...|FAIL|...`` on stderr otherwise) become structlog events ``kafka_client_log``, at most ``LOG_BURST``
per facility every ``LOG_WINDOW_S``; the next one written after a pause says how many were ``suppressed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog
from confluent_kafka import Consumer as _Consumer
from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from inturn.errors import KafkaClientError
from inturn.schemas import clock_offset_ms, now_ms
from inturn.settings import KafkaSettings

#: The partitioner every inturn producer uses; Java's default for keyed records.
PARTITIONER = "murmur2_random"

#: librdkafka log lines written per facility (FAIL, REQTMOUT, ...) per window; the rest are counted. A broker
#: outage of 10 s gave 193 connection-failure lines from one worker's clients: a few say it as well.
LOG_BURST = 5
LOG_WINDOW_S = 10.0

_client_log = structlog.get_logger("inturn.kafka.client")


class LibrdkafkaLogs(logging.Handler):
    """librdkafka's log records (confluent-kafka calls ``logger.log(level, "%s [%s] %s", facility, client, text)``)
    as structlog events ``kafka_client_log``: ``facility``, ``client``, ``detail``, at most ``burst`` per facility
    per ``window_s``; the first one written after some were dropped carries ``suppressed`` (how many)."""

    def __init__(self, burst: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._burst = burst
        self._window_s = window_s
        self._clock = clock
        self._seen: dict[str, tuple[float, int, int]] = {}  # facility -> (window start, written, suppressed)

    def emit(self, record: logging.LogRecord) -> None:  # logging.Handler.handle holds the handler's lock
        args = record.args
        if isinstance(args, tuple) and len(args) == 3:
            facility, client, detail = (str(arg) for arg in args)
        else:
            facility, client, detail = "", record.name, record.getMessage()
        now = self._clock()
        start, written, suppressed = self._seen.get(facility, (now, 0, 0))
        if now - start >= self._window_s:
            start, written = now, 0
        if written >= self._burst:
            self._seen[facility] = (start, written, suppressed + 1)
            return
        self._seen[facility] = (start, written + 1, 0)
        fields: dict[str, Any] = {"facility": facility, "client": client, "detail": detail}
        if suppressed:
            fields["suppressed"] = suppressed
        _client_log.log(record.levelno, "kafka_client_log", **fields)


@functools.cache
def client_logger() -> logging.Logger:
    """The logger every Kafka client of this process is given (one, so that the limit counts all of them)."""
    logger = logging.getLogger("inturn.kafka.librdkafka")
    logger.setLevel(logging.DEBUG)  # librdkafka's own log_level decides what it sends; structlog's level filters
    logger.propagate = False  # not the root logger's plain-text handler as well
    logger.addHandler(LibrdkafkaLogs(LOG_BURST, LOG_WINDOW_S))
    return logger


def base_config(settings: KafkaSettings) -> dict[str, Any]:
    """Bootstrap servers plus the operator's extra librdkafka settings (security etc.); librdkafka's logs go through
    ``client_logger``."""
    return {"bootstrap.servers": settings.kafka_bootstrap, "logger": client_logger(), **settings.kafka_client_config}


def producer_config(settings: KafkaSettings, **overrides: Any) -> dict[str, Any]:
    """An idempotent, Java-partitioned producer's configuration."""
    config: dict[str, Any] = {
        **base_config(settings),
        "enable.idempotence": True,
        "acks": "all",
        "partitioner": PARTITIONER,
        "linger.ms": settings.kafka_linger_ms,
        "compression.type": settings.kafka_compression,
    }
    config.update(overrides)
    # These three are what inturn's guarantees rest on: refuse to weaken them by accident.
    if config.get("partitioner") != PARTITIONER:
        raise ValueError(f"inturn producers must use partitioner={PARTITIONER}")
    if config.get("enable.idempotence") is not True or str(config.get("acks")) not in {"all", "-1"}:
        raise ValueError("inturn producers must be idempotent with acks=all")
    return config


def make_producer(settings: KafkaSettings, **overrides: Any) -> Producer:
    """A new producer (see ``producer_config``)."""
    return Producer(producer_config(settings, **overrides))


def consumer_config(settings: KafkaSettings, group_id: str, **overrides: Any) -> dict[str, Any]:
    """A consumer that commits only what the caller stored, with cooperative-sticky assignment."""
    config: dict[str, Any] = {
        **base_config(settings),
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
        "enable.partition.eof": False,
    }
    config.update(overrides)
    return config


def make_consumer(settings: KafkaSettings, group_id: str, **overrides: Any) -> _Consumer:
    """A new consumer (see ``consumer_config``)."""
    return _Consumer(consumer_config(settings, group_id, **overrides))


def consume_batch(consumer: _Consumer, max_messages: int, timeout: float, linger: float = 0.0) -> list[Message]:
    """Up to ``max_messages`` records: waits up to ``timeout`` for the first, then up to ``linger`` more for
    others to join it (``consume`` alone would wait for the whole batch or the timeout, adding its timeout to
    every quiet moment's latency). A few milliseconds of linger turn a steady trickle into batches: one
    hop between threads per batch instead of per record."""
    first = consumer.poll(timeout)
    if first is None:
        return []
    if max_messages <= 1:
        return [first]
    return [first, *consumer.consume(num_messages=max_messages - 1, timeout=linger)]


def committed_total(settings: KafkaSettings, group: str) -> int:
    """The sum of ``group``'s committed offsets over the messages partitions (0 where none): how many
    messages the group has finished, when it started from the beginning."""
    consumer = make_consumer(settings, group)
    try:
        parts = [TopicPartition(settings.topic_messages, p) for p in range(settings.topic_partitions)]
        return sum(max(tp.offset, 0) for tp in consumer.committed(parts, timeout=10))
    finally:
        consumer.close()


def make_admin(settings: KafkaSettings) -> AdminClient:
    """A new admin client."""
    return AdminClient(base_config(settings))


def murmur2(data: bytes) -> int:
    """Kafka's Java ``Utils.murmur2`` (32-bit, seed 0x9747b28c), as a signed 32-bit int."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str | bytes, partitions: int) -> int:
    """The partition Java's default partitioner (and ``murmur2_random``) picks for a keyed record."""
    raw = key.encode() if isinstance(key, str) else key
    return (murmur2(raw) & 0x7FFFFFFF) % partitions


class DeliveryThread:
    """Serves a producer's delivery reports on a thread of its own: ``poll`` waits inside librdkafka (no GIL held,
    no CPU used while nothing arrives) and runs the records' callbacks; ``after_poll`` runs after each poll.

    The serve loop of the SDK's ``MessageProducer`` (whose callers are not on an event loop; ``AsyncProducer``
    is served by its loop instead).
    """

    def __init__(self, producer: Producer, name: str, after_poll: Callable[[], None] | None = None) -> None:
        self._producer = producer
        self._after_poll = after_poll
        self._stopped = threading.Event()
        self._server = threading.Thread(target=self._serve, name=name, daemon=True)
        self._server.start()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            self._producer.poll(0.1)
            if self._after_poll is not None:
                self._after_poll()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop polling (after ``flush``: the callbacks of what is still queued run in whoever polls next)."""
        self._stopped.set()
        self._server.join(timeout)


#: Record headers as confluent_kafka takes them.
Headers = list[tuple[str, str | bytes | None]]
#: What a record's delivery report calls, on the event loop's thread: (error, record); error None once Kafka
#: confirmed the record.
Delivered = Callable[[KafkaError | None, Message], None]

#: How often the loop polls a producer with records in flight: the most a confirmation waits for the loop to see it.
POLL_INTERVAL_S = 0.001
#: How often it polls one with nothing in flight (librdkafka's other events: errors, logs).
IDLE_POLL_S = 0.5


class AsyncProducer:
    """A producer served by the event loop itself: no thread, no hop between threads per delivery.

    librdkafka reports each delivery through ``poll``. While records are in flight the loop calls ``poll(0)``
    every ``POLL_INTERVAL_S`` from one timer (never waiting inside librdkafka), so a record's ``Delivered``
    callback runs on the loop's thread, where it may settle futures and requests directly. Measured against a
    poll thread that queued the reports and woke the loop once per ``poll``: that thread took the GIL from the
    loop for every batch of reports, and each wake-up wrote to the loop's self-pipe (docs/webhook.md, Performance).
    A record counts as confirmed only with Kafka's ack; only the waiting is shared.

    Create it inside the running loop; only that loop may call ``produce``, ``produce_then`` and ``close``.
    """

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self._loop = asyncio.get_running_loop()
        self._busy = False  # polled every POLL_INTERVAL_S (records in flight), else every IDLE_POLL_S
        self._drained: asyncio.Event | None = None  # set once nothing is in flight (``close``)
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(IDLE_POLL_S, self._poll)

    @property
    def producer(self) -> Producer:
        """The underlying producer (thread-safe calls only, e.g. ``list_topics``)."""
        return self._producer

    def produce(
        self,
        topic: str,
        value: bytes,
        key: str | bytes | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> asyncio.Future[Message]:
        """Queue a record; its future resolves once Kafka confirmed it, or fails with ``KafkaClientError``.
        The errors of ``produce_then``."""
        future: asyncio.Future[Message] = self._loop.create_future()
        self.produce_then(topic, value, functools.partial(_resolve, future), key, headers, partition)
        return future

    def produce_then(
        self,
        topic: str,
        value: bytes,
        delivered: Delivered,
        key: str | bytes | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> None:
        """Queue a record; ``delivered`` runs on the loop once Kafka confirmed or refused it (it must not raise).
        ``partition`` None: the producer's partitioner (murmur2 of the key) chooses.

        ``BufferError`` when librdkafka's local queue stays full (Kafka is not keeping up or is away): it never
        waits for room. ``KafkaClientError`` when librdkafka refuses the record outright.
        """
        where = -1 if partition is None else partition  # -1: librdkafka's "unassigned", the partitioner decides
        # 0: librdkafka stamps the record (CreateTime) with the host's clock; a test clock (inturn.schemas) stamps it
        # with the process's own.
        stamp = now_ms() if clock_offset_ms() else 0
        try:
            self._producer.produce(
                topic, value=value, key=key, headers=headers, partition=where, on_delivery=delivered, timestamp=stamp
            )
        except BufferError:
            # Serve the deliveries already confirmed (never waiting: this runs on the event loop) and try once
            # more; a second BufferError goes to the caller, who refuses the work.
            self._producer.poll(0)
            self._producer.produce(
                topic, value=value, key=key, headers=headers, partition=where, on_delivery=delivered, timestamp=stamp
            )
        except KafkaException as exc:
            raise KafkaClientError(exc.args[0]) from exc
        if not self._busy:
            self._busy = True
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._loop.call_later(POLL_INTERVAL_S, self._poll)

    def _poll(self) -> None:
        try:
            self._producer.poll(0)
        finally:  # the timer is re-armed whatever a callback did
            self._busy = len(self._producer) > 0  # queued, in flight, or reported but not yet served
            if not self._busy and self._drained is not None:
                self._drained.set()
            self._timer = self._loop.call_later(POLL_INTERVAL_S if self._busy else IDLE_POLL_S, self._poll)

    async def close(self, wait_s: float) -> int:
        """Wait up to ``wait_s`` seconds for the records still queued (the timer keeps serving their reports),
        then stop polling; returns how many were left unconfirmed."""
        if len(self._producer):
            self._drained = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), wait_s)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return len(self._producer)


def _resolve(future: asyncio.Future[Message], err: KafkaError | None, msg: Message) -> None:
    if future.done():  # cancelled by its waiter: nothing to tell
        return
    if err is not None:
        future.set_exception(KafkaClientError(err))
    else:
        future.set_result(msg)
