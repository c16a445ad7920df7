"""A Kafka producer whose deliveries reach the event loop in batches: one hop per poll, not one per record.

librdkafka reports each delivery through ``poll``. ``inturn.kafka.AsyncProducer`` hands every record's report
to the event loop on its own (a ``call_soon_threadsafe`` and a wake-up of the loop per record). Here a poll
thread waits in librdkafka (no GIL held, no CPU used while nothing arrives), queues the reports one ``poll``
returned, and wakes the loop once for all of them; the loop then resolves every request's future they
confirm. The guarantee is unchanged: a record's future resolves only with Kafka's ack (or fails with Kafka's
error); only the waiting is shared. (Polling from the loop on a timer instead cost CPU for every tick while
records were in flight, whatever their number: more than this at the callback rates platforms send.)
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import deque

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from inturn.errors import KafkaClientError

Headers = list[tuple[str, str | bytes | None]]  # as confluent_kafka takes them
Report = tuple[asyncio.Future[Message], KafkaError | None, Message]


class BatchedProducer:
    """Produces records and resolves each one's future when Kafka confirmed it, many per wake-up of the loop.

    Create it inside the running loop; only that loop may call ``produce`` and ``close``.
    """

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self._loop = asyncio.get_running_loop()
        self._reports: deque[Report] = deque()  # appended by librdkafka's callers, drained by the loop
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kafka-deliveries", daemon=True)
        self._thread.start()

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
        return future

    def _delivered(self, future: asyncio.Future[Message], err: KafkaError | None, msg: Message) -> None:
        # Runs inside ``poll`` or ``flush``, on whichever thread called it: only queue the report.
        self._reports.append((future, err, msg))

    def _serve(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.1)
            if self._reports:
                self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        while self._reports:
            future, err, msg = self._reports.popleft()
            if future.done():  # cancelled by its waiter: nothing to tell
                continue
            if err is not None:
                future.set_exception(KafkaClientError(err))
            else:
                future.set_result(msg)

    async def close(self, wait_s: float) -> int:
        """Wait up to ``wait_s`` seconds for the records still queued; returns how many were left unconfirmed."""
        left = await asyncio.to_thread(self._producer.flush, wait_s)
        self._closed.set()
        await asyncio.to_thread(self._thread.join, 2.0)
        self._settle()
        return int(left)
