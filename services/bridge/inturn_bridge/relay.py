"""The bridge's one decision point: write a Pub/Sub message to Kafka, dead-letter it, or refuse it.

Pull and push both hand every Pub/Sub message to ``Relay.submit`` and ack it only when the
returned future succeeds; a ``NotWritten`` failure means nack (pull) or 503 (push), and Pub/Sub
delivers the message again.

How per-room order survives failures (docs/bridge.md has the long form):

- One write per room at a time. With ordering enabled, the Pub/Sub client hands the callback
  the next message of an ordering key only after the previous one was acked or nacked, and we
  ack only after Kafka confirmed; so message N+1 is produced only after N is on Kafka. We do not
  rely on that alone: a second message of a room that arrives while one is being written is
  refused (``room_busy``).
- A failed write blocks its room. When the write of N fails, N is nacked; the client may still
  release N+1, N+2 (already received) to the callback. They are refused (``room_blocked``) and
  queued by id behind N, in the order they arrived; only the head of that replay queue may be
  written, so the room resumes N, N+1, N+2 whatever order Pub/Sub redelivers them in (the
  emulator redelivers a nacked message after the later ones). Without this N+1 would be written
  before N. A head that does not come back within ``bridge_replay_timeout_s`` (it went to another
  subscriber) lifts the block.
- Redeliveries of a message already written (its ack was lost, or it was nacked after a write
  that did land) are recognised by Pub/Sub message id within ``bridge_dedupe_window`` and acked
  without a second write. Across a crash the window is lost: those duplicates reach Kafka, each
  carrying its ``pubsub_message_id`` header, and are exactly the messages written but not acked.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass
from enum import StrEnum

import structlog

from inturn.dead_letters import dead_letter
from inturn.errors import InturnError, KafkaClientError
from inturn.metrics import bridge as metrics
from inturn.schemas import DeadLetter, Message
from inturn.sdk import Delivery, MessageProducer
from inturn.settings.bridge import BridgeSettings
from inturn_bridge.convert import PUBSUB_ID_ATTRIBUTE, Poison, PubsubRecord, to_message

log = structlog.get_logger("inturn.bridge")


class Outcome(StrEnum):
    """How a message ended when it can be acked."""

    WRITTEN = "written"  # on the messages topic
    DUPLICATE = "duplicate"  # a redelivery of a message already written: not written again
    DEAD_LETTERED = "dead_lettered"  # poison, on the dead-letter topic


@dataclass(frozen=True)
class Settled:
    """A message that may be acked, and why."""

    outcome: Outcome
    delivery: Delivery | None = None
    reason: str | None = None  # the poison reason, for dead letters


@dataclass
class _Replay:
    """A room blocked by a failed write: Pub/Sub ids in the order they must be written, the failed one first."""

    order: list[str]
    since: float  # when the queue last moved or its head last failed


class NotWritten(InturnError):
    """The message was not written; nack it (pull) or answer 503 (push) so Pub/Sub delivers it again.

    ``reason``: ``kafka_error``, ``room_busy``, ``room_blocked`` or ``draining``.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class Relay:
    """Thread-safe: pull callbacks (client threads) and push handlers (event loop) call ``submit``."""

    def __init__(self, settings: BridgeSettings, producer: MessageProducer) -> None:
        self._settings = settings
        self._producer = producer
        self._mode = settings.bridge_mode
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._written: OrderedDict[str, None] = OrderedDict()  # Pub/Sub ids written or dead-lettered, LRU
        self._writing: set[str] = set()  # rooms with a write in flight
        self._replays: dict[str, _Replay] = {}  # rooms blocked by a failed write
        self._pending = 0

    def submit(self, record: PubsubRecord) -> Future[Settled]:
        """Write ``record`` (or its dead letter); the future settles once Kafka answered or at once if refused."""
        converted = to_message(record, self._settings)
        room = converted.room_id if isinstance(converted, Message) else None
        with self._lock:
            if record.message_id in self._written:
                self._written.move_to_end(record.message_id)
                metrics.MESSAGES.labels(self._mode, Outcome.DUPLICATE).inc()
                return _settled(Settled(Outcome.DUPLICATE))
            if room is not None:
                refusal = self._refusal(room, record.message_id)
                if refusal is not None:
                    metrics.NACKS.labels(self._mode, refusal).inc()
                    metrics.MESSAGES.labels(self._mode, "nacked").inc()
                    return _refused(NotWritten(refusal, f"room {room}"))
                self._writing.add(room)
            self._pending += 1
        metrics.IN_FLIGHT.inc()
        started = time.monotonic()
        headers: list[tuple[str, str | bytes | None]] = [(PUBSUB_ID_ATTRIBUTE, record.message_id)]
        try:
            if isinstance(converted, Poison):
                kafka = self._producer.send_dead_letter(
                    _dead_letter(record, converted, self._settings.bridge_max_message_bytes),
                    converted.room_id,
                    headers,
                )
            else:
                kafka = self._producer.send(converted, headers)
        except KafkaClientError as exc:
            failed: Future[Delivery] = Future()
            failed.set_exception(exc)
            kafka = failed
        settled: Future[Settled] = Future()
        kafka.add_done_callback(lambda done: self._finish(done, record, converted, started, settled))
        return settled

    def _refusal(self, room: str, message_id: str) -> str | None:
        """Why a message of ``room`` may not be written now (None: it may). Called with the lock held."""
        if room in self._writing:
            return "room_busy"
        replay = self._replays.get(room)
        if replay is None:
            return None
        if replay.order[0] == message_id:
            return None
        if time.monotonic() - replay.since > self._settings.bridge_replay_timeout_s:
            # The failed message has not come back for this long: it went to another subscriber.
            log.warning("bridge.replay_abandoned", room_id=room, waiting_for=replay.order[0])
            del self._replays[room]
            return None
        if message_id not in replay.order:
            replay.order.append(message_id)
        return "room_blocked"

    def _finish(
        self,
        done: Future[Delivery],
        record: PubsubRecord,
        converted: Message | Poison,
        started: float,
        settled: Future[Settled],
    ) -> None:
        error = done.exception()
        room = converted.room_id if isinstance(converted, Message) else None
        with self._lock:
            self._pending -= 1
            if room is not None:
                self._writing.discard(room)
            if error is None:
                self._remember(record.message_id)
            if room is not None:
                self._replay_step(room, record.message_id, failed=error is not None)
            self._idle.notify_all()
        metrics.IN_FLIGHT.dec()
        if error is not None:
            log.warning(
                "bridge.write_failed",
                room_id=room,
                pubsub_message_id=record.message_id,
                error=str(error),
            )
            metrics.NACKS.labels(self._mode, "kafka_error").inc()
            metrics.MESSAGES.labels(self._mode, "nacked").inc()
            settled.set_exception(NotWritten("kafka_error", str(error)))
            return
        metrics.WRITE_SECONDS.observe(time.monotonic() - started)
        if isinstance(converted, Poison):
            log.warning(
                "bridge.dead_lettered",
                room_id=converted.room_id,
                pubsub_message_id=record.message_id,
                kind=converted.kind.value,
                reason=converted.reason,
                partition=done.result().partition,
                offset=done.result().offset,
            )
            metrics.DEAD_LETTERS.labels(converted.kind.value).inc()
            metrics.MESSAGES.labels(self._mode, Outcome.DEAD_LETTERED).inc()
            settled.set_result(Settled(Outcome.DEAD_LETTERED, done.result(), converted.reason))
        else:
            metrics.MESSAGES.labels(self._mode, Outcome.WRITTEN).inc()
            settled.set_result(Settled(Outcome.WRITTEN, done.result()))

    def _replay_step(self, room: str, message_id: str, *, failed: bool) -> None:
        """Advance or start the room's replay queue after a write of ``message_id``. Lock held."""
        replay = self._replays.get(room)
        if replay is None:
            if failed:
                self._replays[room] = _Replay([message_id], time.monotonic())
            return
        replay.since = time.monotonic()
        if not failed and replay.order[0] == message_id:
            replay.order.pop(0)
            if not replay.order:
                del self._replays[room]

    def _remember(self, message_id: str) -> None:
        window = self._settings.bridge_dedupe_window
        if window == 0:
            return
        self._written[message_id] = None
        while len(self._written) > window:
            self._written.popitem(last=False)

    @property
    def pending(self) -> int:
        """Writes waiting for Kafka's answer."""
        with self._lock:
            return self._pending

    def wait_idle(self, timeout: float) -> bool:
        """Block until no write is waiting for Kafka (True) or ``timeout`` passed (False)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)


def _dead_letter(record: PubsubRecord, poison: Poison, max_bytes: int) -> DeadLetter:
    raw = record.data
    reason = f"{poison.kind.value}: {poison.reason}"
    if len(raw) > max_bytes:
        # Kafka refuses records above max.message.bytes: an oversized message would fail to
        # dead-letter, be nacked and loop forever. Keep its head and say so.
        raw = raw[:max_bytes]
        reason += f" (dead letter keeps the first {max_bytes} bytes)"
    return dead_letter("bridge", reason, raw, room_id=poison.room_id, message_id=record.message_id)


def _settled(result: Settled) -> Future[Settled]:
    future: Future[Settled] = Future()
    future.set_result(result)
    return future


def _refused(error: NotWritten) -> Future[Settled]:
    future: Future[Settled] = Future()
    future.set_exception(error)
    return future
