"""An in-test platform for the worker's tests, and helpers to run workers and read topics back.

``ScriptedPlatform`` speaks the WhatsApp Cloud API's send call and, playing the webhook's part,
publishes each message's ack to the acks topic (key = room) — with per-recipient behaviour the
tests script: withhold acks, lose a share, ack early (before answering the send), ack late, ack
twice, answer 429/5xx/4xx. Its receipt list (what reached the platform, in order) is the oracle.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from inturn.kafka import AsyncProducer, committed_total, make_producer
from inturn.schemas import (
    ACK_HEADER_MESSAGE_ID,
    ACK_HEADER_PLATFORM_MESSAGE_ID,
    ACK_HEADER_STATUS,
    Ack,
    AckStatus,
    Event,
    EventType,
    Message,
    decode,
    decode_callback_data,
    encode,
    now_ms,
)
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_devtools.receipts import Report, check
from inturn_devtools.waiting import eventually
from inturn_worker.ack_reader import AckReader
from inturn_worker.acks import AckRouter
from inturn_worker.app import Worker
from inturn_worker.events import EventLog
from tests.support.messages import ack as status_of
from tests.support.topics import read_topic as read_topic  # re-exported for the worker tests


@dataclass
class Receipt:
    """One send that reached the platform."""

    room_id: str
    message_id: str
    recipient: str
    at: float
    wamid: str


@dataclass(frozen=True)
class Copy:
    """How the platform treats one accepted send (a copy) of a recipient, scripted in order (``Behaviour.copies``):
    as the platform simulator does, the copy reaches the device some time after it was accepted and its ack is
    published then; the send's answer may come later than both (an answer slower than the sender's timeout)."""

    device_after_s: float = 0.0  # from acceptance to the device (a receipt in ``device``), then its ack
    answer_after_s: float = 0.0  # from acceptance to the send's answer
    ack_after_s: float = 0.0  # from the device to the ack's publication


@dataclass
class Behaviour:
    """How the platform treats one recipient."""

    withhold: bool = False  # never ack
    drop_rate: float = 0.0  # lose this share of acks
    early: bool = False  # publish the ack (and wait for Kafka) before answering the send
    ack_delay_s: float = 0.0  # publish the ack this long after answering
    duplicate: bool = False  # publish every ack twice
    status: AckStatus = AckStatus.SENT
    answers: deque[tuple[int, str | None]] = field(default_factory=deque)  # scripted (HTTP status, Retry-After)
    copies: deque[Copy] = field(default_factory=deque)  # scripted accepted sends, in order (then: the rules above)


class ScriptedPlatform:
    """The platform side of the worker's tests (see the module docstring)."""

    def __init__(self, settings: KafkaSettings, seed: int = 7) -> None:
        self._settings = settings
        self._rng = random.Random(seed)
        self.behaviour: dict[str, Behaviour] = defaultdict(Behaviour)
        self.receipts: list[Receipt] = []  # in the order the platform accepted them
        self.device: list[Receipt] = []  # in the order they reached the device (accepted ones at once, unless scripted)
        self.attempts: list[tuple[str, float, int]] = []  # (message_id, time, HTTP status answered)
        self.acks_published = 0
        self.ack_headers = True  # set the webhook's Kafka headers on each ack (False: as an older webhook did)
        self._producer: AsyncProducer | None = None
        self._runner: web.AppRunner | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self.url = ""

    async def start(self) -> ScriptedPlatform:
        """Listen on a free loopback port."""
        self._producer = AsyncProducer(make_producer(self._settings, **{"linger.ms": 1}))
        app = web.Application()
        app.router.add_post("/{version}/{phone}/messages", self._send)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        """Stop listening; cancel acks not yet published."""
        for task in list(self._pending):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._producer is not None:
            await self._producer.close(5)

    async def _send(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        recipient = body["to"]
        routed = decode_callback_data(body.get("biz_opaque_callback_data"))
        assert routed is not None, body
        room_id, message_id = routed.room_id, routed.message_id
        behaviour = self.behaviour[recipient]
        if behaviour.answers:
            status, retry_after = behaviour.answers.popleft()
            self.attempts.append((message_id, time.monotonic(), status))
            headers = {"Retry-After": retry_after} if retry_after else {}
            error = {"error": {"message": "scripted", "type": "OAuthException", "code": 100, "fbtrace_id": "x"}}
            return web.json_response(error, status=status, headers=headers)
        wamid = f"wamid.{len(self.receipts)}.{message_id}"
        self.attempts.append((message_id, time.monotonic(), 200))
        receipt = Receipt(room_id, message_id, recipient, time.monotonic(), wamid)
        self.receipts.append(receipt)
        if behaviour.copies:
            copy = behaviour.copies.popleft()
            self._later(self._arrive(receipt, copy, behaviour.status))
            await asyncio.sleep(copy.answer_after_s)
            return self._accepted(recipient, wamid)
        self.device.append(receipt)
        lost = behaviour.withhold or (behaviour.drop_rate > 0 and self._rng.random() < behaviour.drop_rate)
        if not lost:
            ack = status_of(room_id, message_id, wamid, behaviour.status, recipient=recipient)
            copies = 2 if behaviour.duplicate else 1
            if behaviour.early:
                for _ in range(copies):
                    await self._publish(ack)
            else:
                self._later(self._publish_later(ack, behaviour.ack_delay_s, copies))
        return self._accepted(recipient, wamid)

    @staticmethod
    def _accepted(recipient: str, wamid: str) -> web.Response:
        return web.json_response(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": recipient, "wa_id": recipient}],
                "messages": [{"id": wamid}],
            }
        )

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _arrive(self, receipt: Receipt, copy: Copy, status: AckStatus) -> None:
        """A scripted copy reaches the device, then its ack is published."""
        await asyncio.sleep(copy.device_after_s)
        self.device.append(receipt)
        await self._publish_later(self.ack(receipt, status), copy.ack_after_s, 1)

    def ack(self, receipt: Receipt, status: AckStatus = AckStatus.SENT) -> Ack:
        """The status of the copy ``receipt`` stands for, as the webhook publishes it."""
        return Ack(
            room_id=receipt.room_id,
            message_id=receipt.message_id,
            platform="whatsapp",
            platform_message_id=receipt.wamid,
            status=status,
            platform_ts_ms=now_ms(),
            received_at_ms=now_ms(),
            recipient=receipt.recipient,
        )

    async def _publish_later(self, ack: Ack, delay: float, copies: int) -> None:
        if delay:
            await asyncio.sleep(delay)
        for _ in range(copies):
            await self._publish(ack)

    def check(self, produced: dict[str, list[str]]) -> Report:
        """The receipt-log checker's verdict on what reached the devices (``device``, in device order)."""
        return check([{"room_id": r.room_id, "message_id": r.message_id} for r in self.device], produced)

    async def _publish(self, ack: Ack) -> None:
        assert self._producer is not None
        headers = ack_headers(ack) if self.ack_headers else None
        await self._producer.produce(self._settings.topic_acks, encode(ack), key=ack.room_id, headers=headers)
        self.acks_published += 1

    def order(self) -> dict[str, list[str]]:
        """Message ids per room in the order they reached the platform."""
        rooms: dict[str, list[str]] = defaultdict(list)
        for receipt in self.receipts:
            rooms[receipt.room_id].append(receipt.message_id)
        return dict(rooms)


def _publish(settings: KafkaSettings, topic: str, records: Sequence[Message | Ack]) -> None:
    """Produce records in list order (key = room), waiting for Kafka."""
    producer = make_producer(settings)
    for record in records:
        producer.produce(topic, key=record.room_id, value=encode(record))
    assert producer.flush(30) == 0


def produce(settings: KafkaSettings, messages: list[Message]) -> None:
    """Produce messages in list order (key = room), waiting for Kafka."""
    _publish(settings, settings.topic_messages, messages)


def produce_raw(settings: KafkaSettings, key: str, value: bytes) -> None:
    """Produce one raw record to the messages topic."""
    producer = make_producer(settings)
    producer.produce(settings.topic_messages, key=key, value=value)
    assert producer.flush(30) == 0


def ack_of(room_id: str, n: int, status: AckStatus = AckStatus.SENT) -> Ack:
    """A status of message ``<room_id>#<n>``, under platform id ``wamid.<room_id>.<n>``."""
    return status_of(room_id, f"{room_id}#{n}", f"wamid.{room_id}.{n}", status)


def ack_headers(ack: Ack) -> list[tuple[str, str | bytes | None]]:
    """The Kafka headers the webhook sets on an ack record (the message id only when the platform echoed it)."""
    headers: list[tuple[str, str | bytes | None]] = [
        (ACK_HEADER_STATUS, ack.status.value.encode()),
        (ACK_HEADER_PLATFORM_MESSAGE_ID, ack.platform_message_id.encode()),
    ]
    if ack.message_id is not None:
        headers.append((ACK_HEADER_MESSAGE_ID, ack.message_id.encode()))
    return headers


def publish_acks(settings: KafkaSettings, acks: list[Ack]) -> None:
    """Produce acks to the acks topic in list order (key = room), waiting for Kafka."""
    _publish(settings, settings.topic_acks, acks)


def ack_reader(settings: WorkerSettings, router: AckRouter | None = None) -> AckReader:
    """An acks reader outside a worker, driven by the test step by step (no event loop needed)."""
    events = EventLog(make_producer(settings), settings, {settings.topic_events: 4, settings.topic_dlq: 4})
    return AckReader(settings, router or AckRouter(3600), events)


def worker_settings(
    topics: KafkaSettings, dsn: str, platform_url: str, group: str, **overrides: object
) -> WorkerSettings:
    """Worker settings for a test: its own topics, schema, group; quick checkpoints."""
    values: dict[str, object] = {
        **topics.model_dump(include=set(KafkaSettings.model_fields)),
        "postgres_dsn": dsn,
        "whatsapp_base_url": platform_url,
        "whatsapp_phone_number_id": "100",
        "worker_group_id": group,
        "worker_http_port": 0,
        "worker_http_host": "127.0.0.1",
        "worker_ack_timeout_ms": 3000,
        "worker_session_timeout_ms": 6000,
        "worker_cursor_flush_ms": 100,
        "worker_commit_interval_ms": 100,
        "worker_retry_base_ms": 50,
        "worker_revoke_grace_ms": 3000,
        "worker_rate_limit_per_s": 10_000,
        "worker_rate_burst": 10_000,
    }
    values.update(overrides)
    return WorkerSettings(**values)  # type: ignore[arg-type]  # pydantic validates the values


@contextlib.asynccontextmanager
async def running_worker(settings: WorkerSettings) -> AsyncIterator[Worker]:
    """A worker running on this event loop; drained and stopped on exit."""
    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, 60)


def committed(settings: KafkaSettings, group: str) -> int:
    """The sum of the group's committed offsets over the messages partitions (blocking)."""
    return committed_total(settings, group)


async def events(settings: KafkaSettings, expect_terminal: int | None = None) -> list[Event]:
    """The events topic decoded; when ``expect_terminal`` is given, read until that many terminal events.

    Reads on a thread: a worker may be running on this event loop and must not be frozen meanwhile.
    """
    from inturn.schemas import TERMINAL_EVENTS

    decoded: list[Event] = []

    def enough() -> bool:
        decoded[:] = [decode(Event, v) for v in read_topic(settings, settings.topic_events)]
        return expect_terminal is None or sum(1 for e in decoded if e.type in TERMINAL_EVENTS) >= expect_terminal

    with contextlib.suppress(TimeoutError):  # the caller asserts on what was read
        await eventually(enough, 30, f"{expect_terminal} terminal events", every=0, blocking=True)
    return decoded


def terminal_by_message(evts: list[Event]) -> dict[str, list[EventType]]:
    """Terminal event types per message id."""
    from inturn.schemas import TERMINAL_EVENTS

    out: dict[str, list[EventType]] = defaultdict(list)
    for event in evts:
        if event.type in TERMINAL_EVENTS:
            out[event.message_id].append(event.type)
    return dict(out)
