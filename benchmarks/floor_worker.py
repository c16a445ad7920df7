"""The worker benchmark's second reference: the least any worker on inturn's stack does per message.

A process that, per message, does only what the delivery contract itself requires and nothing of
inturn's own machinery: consume the message from Kafka and validate it, render and POST it through the
worker's own WhatsApp adapter (same body, pool and gate), wait for its ack from the acks topic
(validated), and produce its two events (dispatched, acked) with the worker's producer settings.
It has no offsets bookkeeping, cursors, retries, rate limits, breaker, backpressure, metrics,
logging or crash safety: it is a measuring instrument, never a way to run inturn.

It answers one question for the benchmark: how much of the worker's cost above a bare POST belongs
to the stack (Kafka through confluent-kafka, asyncio, pydantic, the ack round trip), which no
implementation in this stack avoids, and how much to inturn's own bookkeeping.

Run as its own process with one JSON argument; prints ``ready`` once its consumer has its partitions,
then, when every message reached its ack or its timeout, one JSON line with its CPU time.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import uvloop
from confluent_kafka import Consumer, Producer, TopicPartition

from inturn.kafka import consume_batch, consumer_config, producer_config
from inturn.platforms import WhatsAppAdapter
from inturn.runtime import tune_gc
from inturn.schemas import Ack, Message, decode, now_ms
from inturn.settings import KafkaSettings
from inturn.settings.worker import PlatformSettings, WorkerSettings
from inturn_worker.app import EVENTS_PRODUCER

#: The worker's defaults for its garbage collector and its send timeout, which the floor applies too.
GC_YOUNG_THRESHOLD: int = WorkerSettings.model_fields["worker_gc_young_threshold"].default
SEND_TIMEOUT_S: float = WorkerSettings.model_fields["worker_send_timeout_ms"].default / 1000
ACK_TIMEOUT_S = 5.0
BATCH = 500


class Floor:
    """One run: ``total`` messages from the messages topic, each sent, acked (or timed out) and recorded."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.kafka = KafkaSettings(**config["kafka"])
        self.total: int = config["total"]
        self.messages = Consumer(consumer_config(self.kafka, config["group"]))
        self.acks = Consumer(consumer_config(self.kafka, config["group"] + "-acks"))
        self.producer = Producer(producer_config(self.kafka, **EVENTS_PRODUCER))
        platform = PlatformSettings(
            **config["kafka"], whatsapp_base_url=config["base_url"], whatsapp_access_token=config["token"]
        )
        self.adapter = WhatsAppAdapter(platform, config["pool"], SEND_TIMEOUT_S)
        self.rooms: dict[str, deque[tuple[Message, int, int, int]]] = {}
        self.waiting: dict[tuple[str, str], asyncio.Future[Ack | None]] = {}
        self.early: dict[tuple[str, str], Ack] = {}
        self.finished: set[tuple[str, str]] = set()
        self.done = 0
        self.timed_out = 0
        self.stopping = False
        self.room_tasks: set[asyncio.Task[None]] = set()
        self.threads = ThreadPoolExecutor(2)  # one blocking consume call each for messages and acks

    def _emit(self, kind: str, message: Message, partition: int, offset: int, **times: int | str | None) -> None:
        event = {
            "v": 1,
            "type": kind,
            "room_id": message.room_id,
            "message_id": message.message_id,
            "platform": message.platform,
            "partition": partition,
            "offset": offset,
            "attempt": 1,
            "worker_id": "floor",
            "mode": "ack",
            "ts_ms": now_ms(),
            **times,
        }
        self.producer.produce(self.kafka.topic_events, key=message.room_id, value=orjson.dumps(event))

    async def _room(self, room: str, queue: deque[tuple[Message, int, int, int]]) -> None:
        loop = asyncio.get_running_loop()
        while queue:
            message, partition, offset, consumed = queue.popleft()
            key = (room, message.message_id)
            future: asyncio.Future[Ack | None] = loop.create_future()
            early = self.early.pop(key, None)
            if early is not None:
                future.set_result(early)
            self.waiting[key] = future
            result = await self.adapter.send(self.adapter.prepare(message))
            times = {"consumed_at_ms": consumed, "sent_at_ms": result.sent_at_ms}
            self._emit(
                "dispatched", message, partition, offset, platform_message_id=result.platform_message_id, **times
            )
            timer = loop.call_at(loop.time() + ACK_TIMEOUT_S, _settle, future)
            ack = await future
            timer.cancel()
            del self.waiting[key]
            self.finished.add(key)
            if ack is None:
                self.timed_out += 1
            kind, acked_at = ("acked", ack.received_at_ms) if ack else ("ack_timeout", None)
            self._emit(kind, message, partition, offset, acked_at_ms=acked_at, **times)
            self.done += 1
            if self.done == self.total:
                self.all_done.set_result(None)
        del self.rooms[room]

    async def _intake(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.stopping:
            batch = await loop.run_in_executor(self.threads, consume_batch, self.messages, BATCH, 0.1, 0.005)
            consumed = now_ms()
            for record in batch:
                message = decode(Message, record.value())
                queue = self.rooms.get(message.room_id)
                if queue is None:
                    queue = self.rooms[message.room_id] = deque()
                    task = loop.create_task(self._room(message.room_id, queue))
                    self.room_tasks.add(task)
                    task.add_done_callback(self.room_tasks.discard)
                queue.append((message, record.partition() or 0, record.offset() or 0, consumed))

    async def _acks(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.stopping:
            for record in await loop.run_in_executor(self.threads, consume_batch, self.acks, BATCH, 0.1, 0.005):
                ack = decode(Ack, record.value())
                key = (ack.room_id, ack.message_id or "")
                future = self.waiting.get(key)
                if future is not None:
                    if not future.done():
                        future.set_result(ack)
                elif key not in self.finished:
                    self.early[key] = ack

    def _serve_producer(self) -> None:
        while not self.stopping:
            self.producer.poll(0.1)

    async def run(self) -> dict[str, float]:
        loop = asyncio.get_running_loop()
        self.all_done: asyncio.Future[None] = loop.create_future()
        assigned: asyncio.Future[None] = loop.create_future()

        def on_assign(_consumer: Consumer, _partitions: list[TopicPartition]) -> None:
            loop.call_soon_threadsafe(_settle, assigned)  # runs on the consuming thread

        self.messages.subscribe([self.kafka.topic_messages], on_assign=on_assign)
        self.acks.assign([TopicPartition(self.kafka.topic_acks, p, 0) for p in range(self.kafka.topic_partitions)])
        server = threading.Thread(target=self._serve_producer, daemon=True)
        server.start()
        tune_gc(GC_YOUNG_THRESHOLD)
        tasks = [loop.create_task(self._intake()), loop.create_task(self._acks())]
        await assigned
        before = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        print("ready", flush=True)
        await asyncio.wait([self.all_done, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                task.result()  # a reader stopped early: its error ends the run instead of a hang
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_SELF)
        self.stopping = True
        await asyncio.gather(*tasks)
        await self.adapter.close()
        server.join()
        self.messages.close()
        self.acks.close()
        self.threads.shutdown()
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return {
            "messages": self.done,
            "timed_out": self.timed_out,
            "cpu_s": cpu,
            "wall_s": wall,
            "cpu_us_per_message": cpu / self.done * 1e6,
        }


def _settle(future: asyncio.Future[Any]) -> None:
    """Resolve ``future`` with None unless something resolved it first (an assignment, an ack timeout)."""
    if not future.done():
        future.set_result(None)


def main() -> None:
    result = uvloop.run(Floor(json.loads(sys.argv[1])).run())
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
