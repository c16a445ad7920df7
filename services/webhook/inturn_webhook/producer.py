"""A Kafka producer served from the event loop: one poll confirms every record delivered since the last.

librdkafka reports each delivery through ``poll``. Served from a thread (``inturn.kafka.AsyncProducer``), every
record costs a hop back to the event loop, and the poll thread and the loop contend for the GIL: at one status per
callback that hop was most of a callback's Kafka cost and added milliseconds to its answer. Here the event loop
itself polls, never blocking (``poll(0)``), every ``POLL_INTERVAL_S`` while any record is unconfirmed, and does
not poll at all while none is. The guarantee is the same: a record's future resolves only with Kafka's ack (or
fails with Kafka's error); only the waiting is shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from inturn.errors import KafkaClientError

#: How often the loop asks librdkafka for deliveries while records are unconfirmed. A Kafka round trip takes a
#: few milliseconds, so this adds well under one to an answer and costs one cheap non-blocking call per tick.
POLL_INTERVAL_S = 0.001

Headers = list[tuple[str, str | bytes | None]]  # as confluent_kafka takes them


class LoopProducer:
    """Produces records and resolves each one's future when Kafka confirmed it, polling from the event loop.

    Create it inside the running loop; only that loop may call ``produce`` and ``close``.
    """

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self._loop = asyncio.get_running_loop()
        self._unconfirmed = 0
        self._work = asyncio.Event()
        self._pump = self._loop.create_task(self._serve(), name="kafka-deliveries")

    @property
    def producer(self) -> Producer:
        """The underlying producer (thread-safe calls only, e.g. ``list_topics``)."""
        return self._producer

    def produce(
        self, topic: str, value: bytes, key: str | None = None, headers: Headers | None = None
    ) -> asyncio.Future[Message]:
        """Queue a record; its future resolves once Kafka confirmed it, or fails with ``KafkaClientError``.

        ``BufferError`` when librdkafka's local queue stays full (Kafka is not keeping up or is away): it never
        waits for room. ``KafkaClientError`` when librdkafka refuses the record outright.
        """
        future: asyncio.Future[Message] = self._loop.create_future()
        delivered = functools.partial(self._delivered, future)
        try:
            self._producer.produce(topic, value=value, key=key, headers=headers, on_delivery=delivered)
        except BufferError:
            # Serve the deliveries already confirmed (never waiting) and try once more; a second BufferError
            # goes to the caller, who refuses the work.
            self._producer.poll(0)
            self._producer.produce(topic, value=value, key=key, headers=headers, on_delivery=delivered)
        except KafkaException as exc:
            raise KafkaClientError(exc.args[0]) from exc
        self._unconfirmed += 1
        self._work.set()
        return future

    def _delivered(self, future: asyncio.Future[Message], err: KafkaError | None, msg: Message) -> None:
        # Runs inside ``poll``, on the loop's thread: the future can be resolved directly.
        self._unconfirmed -= 1
        if future.done():  # cancelled by its waiter: nothing to tell
            return
        if err is not None:
            future.set_exception(KafkaClientError(err))
        else:
            future.set_result(msg)

    async def _serve(self) -> None:
        while True:
            await self._work.wait()
            while self._unconfirmed:
                await asyncio.sleep(POLL_INTERVAL_S)
                self._producer.poll(0)
            self._work.clear()  # no await since the check: nothing was produced in between

    async def close(self, wait_s: float) -> int:
        """Wait up to ``wait_s`` seconds for the records still queued; returns how many were left unconfirmed."""
        deadline = self._loop.time() + wait_s
        while len(self._producer) and self._loop.time() < deadline:
            self._producer.poll(0)
            await asyncio.sleep(0.01)
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._pump
        return len(self._producer)
