"""Statuses onto Kafka: acks keyed by room on the acks topic (or, once they can no longer change an outcome, on the
statuses topic), everything unusable on the dead-letter topic.

A request is answered 200 only once Kafka confirmed every record it produced; when confirmation
does not come within the timeout the request fails with ``KafkaNotConfirmedError`` (503, the
platform retries). Replays of a status already confirmed are not produced again: the
``ReplayWindow`` remembers recent (platform, platform message id, status) triples. It is per
process, so a replay landing on another replica is published again; the worker treats a
duplicate ack as harmless.

Statuses off the workers' path (``INTURN_WEBHOOK_STATUSES_SPLIT``, docs/webhook.md): a worker's outcome for a
message is decided by the first status it reads for it (sent, delivered, read: acked; failed: dead-lettered); a later
one is a duplicate, or the late ack already reported. So once Kafka confirmed a message's status on the acks topic
(its *deciding* status), every later status of that message goes to the statuses topic, which only the nightly
report reads. The ``DecidedWindow`` remembers those messages, per process and bounded: a status of a message it
does not remember (another replica decided it, this one restarted, or it was forgotten) goes to the acks topic, as
without the split, so what the webhook cannot know costs a duplicate at the worker, never an ack. Two kinds of
status never have a deciding one: a watermark (Messenger) resolves whichever message of its room it covers, so it
always goes to acks; on a platform whose send answer is the ack (``AckKind.SYNCHRONOUS``: Instagram's endpoint,
``Callback.answered_by_send``) no status decides anything, so all go to statuses. The generic endpoint's platform
name is the caller's label, not an adapter, so its statuses follow the per-message rule whatever it is called.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any

import orjson
import structlog
from confluent_kafka import KafkaError, Message

from inturn import dead_letters, schemas
from inturn.deadlines import Deadlines
from inturn.errors import KafkaClientError
from inturn.kafka import AsyncProducer, Delivered, Headers
from inturn.metrics import webhook as metrics
from inturn.metrics.lockfree import CounterChild
from inturn.settings.webhook import WebhookSettings
from inturn_webhook.confirmations import Confirmation, KafkaNotConfirmedError, Outcome
from inturn_webhook.statuses import Callback, Status, ack_bytes

log = structlog.get_logger("inturn.webhook")

ReplayKey = tuple[str, str, str]  # (platform, platform message id, status)
DecidedKey = tuple[str, str]  # (platform, platform message id)
#: The reasons of ``inturn_webhook_dead_letters_total`` (a fixed set: the record's own reason may quote the input).
DEAD_LETTER_KINDS = ("unreadable_body", "invalid_status", "unknown_room")


class ReplayWindow:
    """The most recent ``size`` confirmed statuses, and the ones still waiting for Kafka."""

    def __init__(self, size: int) -> None:
        self._size = size
        #: The confirmed statuses, oldest first (read directly on the hot path: ``key in confirmed``).
        self.confirmed: OrderedDict[ReplayKey, None] = OrderedDict()
        self.in_flight: dict[ReplayKey, Record] = {}

    def __contains__(self, key: ReplayKey) -> bool:
        return key in self.confirmed

    def remember(self, key: ReplayKey) -> None:
        """Record ``key`` as confirmed, forgetting the oldest beyond the window's size."""
        if self._size <= 0:
            return
        seen = self.confirmed
        seen[key] = None
        seen.move_to_end(key)
        if len(seen) > self._size:
            seen.popitem(last=False)

    def settle(self, key: ReplayKey, record: Record, confirmed: bool) -> None:
        """``record`` (the one for ``key``) is done: remember it when Kafka confirmed it."""
        if self.in_flight.get(key) is record:
            del self.in_flight[key]
        if confirmed:
            self.remember(key)


class DecidedWindow:
    """The most recent ``size`` messages whose deciding status Kafka confirmed on the acks topic (least recently
    decided first out): their later statuses can no longer change a worker's outcome."""

    def __init__(self, size: int) -> None:
        self._size = size
        #: Oldest first (read directly on the hot path: ``key in decided``).
        self.decided: OrderedDict[DecidedKey, None] = OrderedDict()

    def __contains__(self, key: DecidedKey) -> bool:
        return key in self.decided

    def __len__(self) -> int:
        return len(self.decided)

    def remember(self, key: DecidedKey) -> None:
        """``key``'s deciding status is on the acks topic; forget the oldest beyond the window's size."""
        decided = self.decided
        if key in decided:
            return
        decided[key] = None
        if len(decided) > self._size:
            decided.popitem(last=False)


class Record:
    """One status's record on its way to Kafka, and the requests waiting for it: the one that produced it and any
    that carried the same status meanwhile. Its delivery report (``delivered``, an ``inturn.kafka.Delivered``)
    settles its replay key (and, for a message's deciding status on the acks topic, remembers the message as
    decided), then counts each of those requests down."""

    __slots__ = ("_decides", "_first", "_key", "_more", "_replays")

    def __init__(
        self,
        replays: ReplayWindow,
        key: ReplayKey,
        confirmation: Confirmation,
        decides: DecidedWindow | None = None,
    ) -> None:
        self._replays = replays
        self._key = key
        self._first = confirmation
        self._more: list[Confirmation] | None = None  # the requests that joined it (a replay in flight: rare)
        self._decides = decides  # set when this is a status on the acks topic and the split is on
        confirmation.expect()

    def join(self, confirmation: Confirmation) -> None:
        """``confirmation``'s request waits for this record too."""
        confirmation.expect()
        if self._more is None:
            self._more = [confirmation]
        else:
            self._more.append(confirmation)

    def delivered(self, err: KafkaError | None, _msg: Message) -> None:
        """Kafka confirmed the record (``err`` None) or refused it."""
        self._replays.settle(self._key, self, err is None)
        if err is None and self._decides is not None:
            self._decides.remember((self._key[0], self._key[1]))
        error = None if err is None else KafkaClientError(err)
        self._first.settled(error)
        if self._more is not None:
            for confirmation in self._more:
                confirmation.settled(error)


class AckIntake:
    """Produces a request's acks and dead letters and waits for Kafka to confirm them."""

    def __init__(self, producer: AsyncProducer, settings: WebhookSettings) -> None:
        self._producer = producer
        self._acks_topic = settings.topic_acks
        self._statuses_topic = settings.topic_statuses
        self._dlq_topic = settings.topic_dlq
        self._timeout = settings.webhook_kafka_confirm_timeout_ms / 1000
        self._loop = asyncio.get_running_loop()
        self._deadlines = Deadlines(self._loop)
        self.replays = ReplayWindow(settings.webhook_replay_window)
        #: Messages whose deciding status is on the acks topic (None: the split is off, every status goes to acks).
        self.decided = DecidedWindow(settings.webhook_decided_window) if settings.webhook_statuses_split else None
        self.last_confirmed = 0.0  # monotonic time Kafka last confirmed a record (readiness)
        #: The largest dead-letter record the topic takes (``inturn.dead_letters.record_limit``; the lifespan sets it
        #: from the topic's max.message.bytes once the broker answered).
        self.dead_letter_limit = dead_letters.RECORD_LIMIT
        #: How many partitions the acks topic has (from the readiness probe's metadata; None until it answered).
        self.acks_partitions: int | None = None
        # Metric children by label values, looked up here rather than through ``labels`` (a lock and a lookup
        # of its own) for every status. The label values are a fixed set per platform.
        self._statuses: dict[tuple[str, str, str], CounterChild] = {}
        self._dead_letters = {kind: metrics.DEAD_LETTERS.labels(kind) for kind in DEAD_LETTER_KINDS}
        self._confirm_seconds = metrics.KAFKA_CONFIRM_SECONDS.labels()

    def _counted(self, platform: str, status: str, outcome: str) -> CounterChild:
        key = (platform, status, outcome)
        child = self._statuses.get(key)
        if child is None:
            child = self._statuses[key] = metrics.STATUSES.labels(platform, status, outcome)
        return child

    def _produce(
        self,
        topic: str,
        value: bytes,
        delivered: Delivered,
        key: str | None,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> None:
        try:
            self._producer.produce_then(topic, value, delivered, key, headers, partition)
        except BufferError as full:  # the local queue stayed full: Kafka is not keeping up or is away
            raise KafkaNotConfirmedError("producer queue full") from full
        except KafkaClientError as refused:
            raise KafkaNotConfirmedError(f"produce refused: {refused}") from refused

    def _dead_letter(self, platform: str, kind: str, reason: str, raw: bytes, delivered: Delivered) -> None:
        # ``kind`` is the metric label (a fixed set); ``reason`` may quote the input and goes only in the record.
        self._dead_letters[kind].inc()
        # Whole when it fits the topic's record limit, else bounded (size, SHA-256, first bytes): a body too large to
        # keep whole must not be refused (503) on every retry of the platform.
        record = dead_letters.dead_letter("webhook", reason, raw, limit=self.dead_letter_limit, topic=self._acks_topic)
        log.warning(
            "dead_lettered", platform=platform, kind=kind, reason=reason, size=len(raw), truncated=record.truncated
        )
        self._produce(self._dlq_topic, schemas.encode(record), delivered, None)

    def dead_letter(self, platform: str, reason: str, raw: bytes) -> Confirmation:
        """Put a whole request body from ``platform`` on the dead-letter topic; what to wait for (``confirmed``)."""
        confirmation = Confirmation(self._loop, self._timeout)
        confirmation.expect()
        self._dead_letter(platform, "unreadable_body", reason, raw, confirmation.delivered)
        confirmation.watch(self._deadlines)
        return confirmation

    def submit(self, platform: str, callback: Callback) -> Confirmation:
        """Produce every status of ``callback`` (acks, unknown rooms, rejects); what to wait for (``confirmed``), its
        ``outcome`` what the statuses became. It does not wait: the caller awaits the confirmation itself, so a
        callback's path holds no coroutine between the endpoint and Kafka's confirmation."""
        outcome = Outcome(ignored=len(callback.ignored))
        for kind in callback.ignored:
            metrics.IGNORED_CHANGES.labels(platform, kind).inc()
        received_at_ms = schemas.now_ms()
        # Each record's delivery report settles its replay key and counts this request down (``Record``).
        confirmation = Confirmation(self._loop, self._timeout, outcome)
        replays = self.replays
        confirmed, in_flight = replays.confirmed, replays.in_flight
        produce = self._producer.produce_then
        window = self.decided
        decided = window.decided if window is not None else None
        answered_by_send = callback.answered_by_send
        try:
            for status in callback.statuses:
                key = (platform, status.platform_message_id, status.status)
                if key in confirmed:
                    outcome.replayed += 1
                    self._counted(platform, status.status, "replayed").inc()
                    continue
                pending = in_flight.get(key)
                if pending is not None:  # the same status is on its way already (this or another request)
                    outcome.replayed += 1
                    pending.join(confirmation)
                    continue
                if status.room_id is None:
                    record = Record(replays, key, confirmation)
                    outcome.unknown_room += 1
                    self._counted(platform, status.status, "unknown_room").inc()
                    source = ack_source(status.source)
                    self._dead_letter(platform, "unknown_room", "unknown room", source, record.delivered)
                elif decided is not None and status.watermark_ms is None and (answered_by_send or key[:2] in decided):
                    # Nothing this status says can change the worker's outcome: off the acks topic (module docstring).
                    record = Record(replays, key, confirmation)
                    produce(
                        self._statuses_topic,
                        ack_bytes(status, platform, received_at_ms),
                        record.delivered,
                        status.room_id,
                        ack_headers(status),
                    )
                    confirmation.to_statuses.append(status.status)
                else:
                    # It may decide the worker's outcome: the acks topic (once confirmed, its message is decided).
                    # A watermark is never a message's deciding status (module docstring): not remembered.
                    record = Record(replays, key, confirmation, window if status.watermark_ms is None else None)
                    # The hot path calls the producer itself (one frame less than ``_produce``, same errors).
                    produce(
                        self._acks_topic,
                        ack_bytes(status, platform, received_at_ms),
                        record.delivered,
                        status.room_id,
                        ack_headers(status),
                        self.ack_partition(status),
                    )
                    confirmation.published.append(status.status)
                in_flight[key] = record
        except BufferError as full:  # the local queue stayed full: Kafka is not keeping up or is away
            raise KafkaNotConfirmedError("producer queue full") from full
        except KafkaClientError as refused:
            raise KafkaNotConfirmedError(f"produce refused: {refused}") from refused
        for rejected in callback.rejected:
            outcome.dead_lettered += 1
            self._counted(platform, "none", "invalid").inc()
            reason = f"invalid status: {rejected.reason}"
            confirmation.expect()
            self._dead_letter(platform, "invalid_status", reason, rejected.raw, confirmation.delivered)
        outcome.published = len(confirmation.published) + len(confirmation.to_statuses)
        if confirmation.waiting:
            # One timer for every request's deadline; a timeout does not cancel the records, which may still be
            # confirmed later (and are then remembered as replays).
            confirmation.watch(self._deadlines)
        return confirmation

    def confirmed(self, platform: str, confirmation: Confirmation, error: BaseException | None) -> None:
        """``confirmation``'s wait ended (``error`` None: Kafka confirmed every record; else why not): count it.
        ``KafkaNotConfirmedError`` when it did not end well."""
        if error is not None:
            raise error
        now = self.last_confirmed = time.monotonic()
        self._confirm_seconds.observe(now - confirmation.started)
        for value in confirmation.published:
            self._counted(platform, value, "published").inc()
        for value in confirmation.to_statuses:
            self._counted(platform, value, "published_statuses").inc()

    def ack_partition(self, status: Status) -> int | None:
        """The acks partition of ``status``: the messages partition the worker sent it from, which the platform
        echoed (docs/architecture.md: acks are routed by the consumed partition), so the ack reaches that worker
        whatever partitioner the message's producer used. None (murmur2 of the room, the producer's partitioner)
        when the status carries none, or one the acks topic does not have."""
        partition = status.partition
        if partition is None or (self.acks_partitions is not None and partition >= self.acks_partitions):
            return None
        return partition

    def close(self) -> None:
        """Answer every request still waiting (503) and stop the deadline timer."""
        self._deadlines.close(expire=True)


def ack_headers(status: Status) -> Headers:
    """The Kafka headers of an ack record (``inturn.schemas.ACK_HEADER_*``): the worker reads what the ack is
    about from them without decoding the value. The message id header only when the platform echoed it."""
    headers: Headers = [
        (schemas.ACK_HEADER_STATUS, status.status.encode()),
        (schemas.ACK_HEADER_PLATFORM_MESSAGE_ID, status.platform_message_id.encode()),
    ]
    if status.message_id is not None:
        headers.append((schemas.ACK_HEADER_MESSAGE_ID, status.message_id.encode()))
    return headers


def ack_source(source: dict[str, Any]) -> bytes:
    """The status as received, as bytes for the dead-letter topic."""
    return orjson.dumps(source)
