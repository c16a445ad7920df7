"""The floor of the worker benchmark: per message, the work any worker of this design must do, and nothing else.

Per message it takes the record from the messages topic and decodes it (msgspec, as the worker does), renders the
platform's body (the worker's own adapter), POSTs it through the worker's transport with the worker's pool of
connections, reads the message's status records on the acks topic (their headers only: the least that tells which
message a status is about, as the worker's skip reads them; one with the webhook's statuses split, two without), and
writes one event (the worker's ``EventLog``, confirmed by Kafka). It orders nothing, waits for no ack before the
next send, keeps no cursor, writes nothing to PostgreSQL and commits no offset. Against the bare POST it is the
price of Kafka on both sides of the send; the worker against it is the price of ordering, bookkeeping and
durability.

``--without-post`` leaves the platform out: per message it takes and decodes the record, writes its one event and
reads its statuses (written before by a run with the POST, which it reads again from the start), and renders
nothing, POSTs nothing and parses no answer (the bare POST counts the body's rendering). What is left is the Kafka
part of the floor: a worker costs at least the bare POST plus this.

``--ordered`` adds the least that ordering itself costs: each room's messages go one at a time, the next only once
the room's message before was acknowledged (its status read from the acks topic, matched by the message id the
webhook puts in a header), and the event is written then. One task per room with messages, a future per message and
a map from message id to it: no timeout, no retry, no cursor, no commit, no dedup, no metrics, no log context. Against
the floor without it, it is the price of waiting for each ack before the next send, which no ack-gated worker
avoids: the worker against it is the price of its bookkeeping and durability. ``--callbacks`` orders the same way
without a task or future of its own per room or message: each room's next send starts from the callback of its
send's answer or from the reading of its ack. Both ways cost about the same (docs/benchmarks.md), so neither is an
artefact of how the waiting is written.

``python -m benchmarks.floor_worker MESSAGES STATUSES_PER_MESSAGE [--without-post | --ordered | --callbacks]``, run
as its own process with a worker's environment (``Pipeline.worker_settings_env``) after the messages were produced;
prints its own CPU time (getrusage of the whole process: every thread, user + system, librdkafka's included) per
message as JSON. A send answered other than 200 ends it with an error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections import deque
from typing import Any

import uvloop
from confluent_kafka import OFFSET_BEGINNING, Message, TopicPartition

from inturn.kafka import make_consumer, make_producer
from inturn.platforms.transport import Response
from inturn.platforms.whatsapp import WhatsAppAdapter
from inturn.runtime import tune_gc
from inturn.schemas import ACK_HEADER_MESSAGE_ID, ACK_HEADER_STATUS, EventType, decode, now_ms
from inturn.schemas import Message as InturnMessage
from inturn.settings.worker import WorkerSettings
from inturn_worker.app import EVENTS_PRODUCER
from inturn_worker.events import EventLog

POLL_S = 0.005  # as the worker's acks reader while messages wait


def _from_start(topic: str, partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]


async def run(
    messages: int, statuses_per_message: int, post: bool = True, ordered: bool = False, callbacks: bool = False
) -> dict[str, Any]:
    """Send ``messages`` (already on the messages topic) and read ``statuses_per_message`` statuses of each; without
    ``post``, write each message's event at once instead of sending it; ``ordered``, each room's messages one after
    the other, each after the one before was acknowledged (by a task per room, or with ``callbacks`` from the
    callbacks of the send's answer and of the ack)."""
    ordered = ordered or callbacks
    settings = WorkerSettings()
    adapter = WhatsAppAdapter(settings, settings.worker_pool_size, settings.worker_send_timeout_ms / 1000)
    group = f"floor-{uuid.uuid4().hex[:8]}"
    # The worker's fetch settings on both consumers (its intake's and its acks reader's).
    intake = make_consumer(
        settings,
        group,
        **{"fetch.wait.max.ms": settings.worker_fetch_wait_max_ms, "fetch.min.bytes": settings.worker_fetch_min_bytes},
    )
    acks = make_consumer(
        settings,
        f"{group}.acks",
        **{
            "fetch.wait.max.ms": settings.worker_acks_fetch_wait_max_ms,
            "fetch.min.bytes": settings.worker_acks_fetch_min_bytes,
        },
    )
    topic = settings.topic_messages
    partitions = len(intake.list_topics(topic, timeout=10).topics[topic].partitions)  # as the worker's layout check
    intake.assign(_from_start(settings.topic_messages, partitions))
    acks.assign(_from_start(settings.topic_acks, partitions))
    events = EventLog(
        make_producer(settings, **EVENTS_PRODUCER),
        settings,
        {settings.topic_events: partitions, settings.topic_dlq: partitions},
    )
    line: asyncio.Queue[tuple[InturnMessage, int, int]] = asyncio.Queue()
    sent = statuses = 0
    expected = messages * statuses_per_message

    # --ordered: each room's messages not yet sent, the rooms whose loop runs, and the acknowledgements awaited (or
    # read before their send returned) by message id.
    queues: dict[str, deque[tuple[InturnMessage, int, int]]] = {}
    loops: dict[str, asyncio.Task[None]] = {}
    awaited: dict[str, asyncio.Future[None]] = {}
    early: set[str] = set()
    failures: list[BaseException] = []  # a room loop's error ends the reading (its statuses would never come)

    def written(message: InturnMessage, partition: int, offset: int, sent_at_ms: int, platform_message_id: str) -> None:
        nonlocal sent
        events.emit(
            EventType.ACKED if ordered else EventType.SENT,
            message.room_id,
            message.message_id,
            message.platform,
            partition,
            offset,
            created_at_ms=message.created_at_ms,
            sent_at_ms=sent_at_ms,
            platform_message_id=platform_message_id,
        )
        sent += 1

    async def consume() -> None:
        taken = 0
        while taken < messages:
            batch: list[Message] = intake.consume(num_messages=500, timeout=0)
            for record in batch:
                message = decode(InturnMessage, record.value() or b"")
                if ordered:
                    room_id = message.room_id
                    queues.setdefault(room_id, deque()).append((message, record.partition() or 0, record.offset() or 0))
                    if callbacks:
                        if room_id not in busy:
                            send_next(room_id)
                    elif room_id not in loops:
                        loops[room_id] = asyncio.create_task(room_loop(room_id))
                        loops[room_id].add_done_callback(raised)
                elif post:
                    line.put_nowait((message, record.partition() or 0, record.offset() or 0))
                else:
                    written(message, record.partition() or 0, record.offset() or 0, now_ms(), message.message_id)
            taken += len(batch)
            await asyncio.sleep(0 if len(batch) == 500 else POLL_S)

    async def lane() -> None:
        while True:  # until cancelled, once every status was read
            message, partition, offset = await line.get()
            prepared = adapter.prepare(message, partition)
            response = await adapter.transport.request(prepared.url, prepared.headers, prepared.body)
            if response.status != 200:  # a floor of failed sends measures nothing; and their statuses never come
                raise RuntimeError(f"the simulator answered {response.status}: {response.body[:200]!r}")
            result = adapter.result_of(response)
            written(message, partition, offset, response.sent_at_ms, result.platform_message_id)

    def accepted(message: InturnMessage, response: Response) -> tuple[str, bool] | None:
        """--ordered: the platform's id of the accepted send, and whether its ack was read before the answer came;
        None when the simulator refused it (kept in ``failures``: its status would never come)."""
        if response.status != 200:
            failures.append(RuntimeError(f"the simulator answered {response.status}: {response.body[:200]!r}"))
            return None
        platform_message_id = adapter.result_of(response).platform_message_id
        if message.message_id in early:
            early.discard(message.message_id)
            return platform_message_id, True
        return platform_message_id, False

    async def room_loop(room_id: str) -> None:
        loop = asyncio.get_running_loop()
        queue = queues[room_id]
        try:
            while queue:  # until the room has nothing buffered (a message consumed later starts another loop)
                message, partition, offset = queue.popleft()
                prepared = adapter.prepare(message, partition)
                response = await adapter.transport.request(prepared.url, prepared.headers, prepared.body)
                outcome = accepted(message, response)
                if outcome is None:
                    return
                platform_message_id, acked_before = outcome
                if not acked_before:
                    acked = awaited[message.message_id] = loop.create_future()
                    await acked
                written(message, partition, offset, response.sent_at_ms, platform_message_id)
        finally:
            del loops[room_id]

    # --callbacks: no task and no future of its own per room or message; the room's next send starts from the
    # callback of its send's answer (when the ack came first) or from the reading of its ack.
    busy: dict[str, tuple[InturnMessage, int, int, int, str] | None] = {}  # room -> its message sent, once answered
    by_message: dict[str, str] = {}  # message id -> room, while its ack is awaited

    def send_next(room_id: str) -> None:
        queue = queues[room_id]
        if not queue:
            busy.pop(room_id, None)
            return
        message, partition, offset = queue.popleft()
        busy[room_id] = None
        prepared = adapter.prepare(message, partition)
        answer = adapter.transport.request(prepared.url, prepared.headers, prepared.body)
        answer.add_done_callback(lambda done: answered(room_id, message, partition, offset, done))

    def answered(
        room_id: str, message: InturnMessage, partition: int, offset: int, answer: asyncio.Future[Response]
    ) -> None:
        if (error := answer.exception()) is not None:
            failures.append(error)
            return
        response = answer.result()
        outcome = accepted(message, response)
        if outcome is None:
            return
        platform_message_id, acked_before = outcome
        if acked_before:
            written(message, partition, offset, response.sent_at_ms, platform_message_id)
            send_next(room_id)
        else:
            busy[room_id] = (message, partition, offset, response.sent_at_ms, platform_message_id)
            by_message[message.message_id] = room_id

    def raised(task: asyncio.Task[None]) -> None:
        """A room loop that raised ends the reading too: its statuses would never come."""
        if not task.cancelled() and (exc := task.exception()) is not None:
            failures.append(exc)

    def acknowledged(headers: list[tuple[str, str | bytes | None]]) -> None:
        for name, value in headers:
            if name == ACK_HEADER_MESSAGE_ID and isinstance(value, bytes):  # a consumed record's values are bytes
                message_id = value.decode()
                if callbacks:
                    room_id = by_message.pop(message_id, None)
                    if room_id is None:
                        early.add(message_id)
                        continue
                    sent_message = busy[room_id]
                    assert sent_message is not None
                    written(*sent_message)
                    send_next(room_id)
                    continue
                waiter = awaited.pop(message_id, None)
                if waiter is None:
                    early.add(message_id)
                else:
                    waiter.set_result(None)

    async def read_statuses() -> None:
        nonlocal statuses
        while statuses < expected:
            if failures:
                raise failures[0]
            batch: list[Message] = acks.consume(num_messages=1000, timeout=0)
            for record in batch:
                headers = record.headers() or []
                names = headers.keys() if isinstance(headers, dict) else (name for name, _ in headers)
                if ACK_HEADER_STATUS in names:
                    statuses += 1
                    if ordered and isinstance(headers, list):
                        acknowledged(headers)
            events.poll()
            await asyncio.sleep(0 if len(batch) == 1000 else POLL_S)

    tune_gc(settings.worker_gc_young_threshold)  # as the worker tunes its collector
    cpu0, t0 = time.process_time(), time.perf_counter()  # process_time: user + system CPU of all threads
    lanes = [asyncio.create_task(lane()) for _ in range(settings.worker_pool_size if post and not ordered else 0)]

    async def read_all() -> None:
        await asyncio.gather(consume(), read_statuses())

    reading = asyncio.create_task(read_all())
    # Lanes run until cancelled: one that ends has raised, and its message's statuses would never come.
    done, _ = await asyncio.wait([reading, *lanes], timeout=600, return_when=asyncio.FIRST_COMPLETED)
    if reading not in done:
        reading.cancel()
        for task in done:
            task.result()
        raise TimeoutError(f"not every status read in 600 s ({statuses} of {expected}, {sent} sent)")
    reading.result()
    if callbacks and busy:
        raise RuntimeError(f"{len(busy)} rooms still waiting for an ack after every status was read")
    if loops:  # --ordered: the last acknowledged messages' events (every status was read: each loop is about to end)
        _, waiting = await asyncio.wait(list(loops.values()), timeout=60)
        if waiting:
            raise TimeoutError(f"{len(waiting)} rooms still waiting for an ack after every status was read")
    confirmed = await events.confirm(wait_s=30)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    for task in lanes:
        task.cancel()
    await asyncio.gather(*lanes, return_exceptions=True)
    await adapter.close()
    intake.close()
    acks.close()
    return {
        "messages": messages,
        "sent": sent,
        "statuses_read": statuses,
        "events_confirmed": confirmed,
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_us_per_message": cpu / messages * 1e6,
    }


def main() -> None:
    """Parse the command line, run, print the figures as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.floor_worker", description=__doc__)
    parser.add_argument("messages", type=int)
    parser.add_argument("statuses_per_message", type=int)
    parser.add_argument("--without-post", action="store_true", help="the Kafka part only: no rendering, no POST")
    parser.add_argument("--ordered", action="store_true", help="each room's next send only after its ack")
    parser.add_argument(
        "--callbacks", action="store_true", help="ordered, each room's next send started from callbacks, not a task"
    )
    a = parser.parse_args()
    figures = run(a.messages, a.statuses_per_message, not a.without_post, a.ordered, a.callbacks)
    print(json.dumps(uvloop.run(figures)))


if __name__ == "__main__":
    main()
