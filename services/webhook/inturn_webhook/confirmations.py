"""Waiting for Kafka to confirm a request's records: one countdown per request, one timer for every deadline.

A request is answered 200 only once Kafka confirmed every record it produced, and 503 when that has not
happened within the confirm timeout. ``asyncio.wait`` per request cost a set, a waiter, a done-callback per
record and a timer per request; a future per record cost its creation and a loop callback per record. Here
each record's delivery report counts its request down directly (``Confirmation.delivered``), and since
every request waits the same timeout, deadlines fall in the order requests started: ``Deadlines`` keeps the
requests still waiting in that order and arms one timer, for the oldest. The guarantee is per request; only
the waiting is shared.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass

from confluent_kafka import KafkaError, Message

from inturn.errors import InturnError, KafkaClientError


class KafkaNotConfirmedError(InturnError):
    """Kafka did not confirm a request's records in time, or refused them: answer 503."""


@dataclass(slots=True)
class Outcome:
    """What a request's statuses became; the 200 answer's body (orjson writes the fields in this order)."""

    published: int = 0
    replayed: int = 0
    unknown_room: int = 0
    dead_lettered: int = 0
    ignored: int = 0


class Confirmation:
    """The records of one request on their way to Kafka: settled when every one is confirmed, one is refused, or
    the deadline passes. It carries what the request's statuses became (``outcome``, ``published``) until then.

    ``done`` is the future a request awaits: its result is None once every record is confirmed, else the
    ``KafkaNotConfirmedError`` saying why not."""

    __slots__ = ("_count", "_left", "_timeout", "deadline", "done", "outcome", "published", "started")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float, outcome: Outcome | None = None) -> None:
        self.done: asyncio.Future[BaseException | None] = loop.create_future()
        self._count = 0
        self._left = 0
        self._timeout = timeout
        self.deadline = loop.time() + timeout
        self.started = time.monotonic()
        self.outcome = outcome if outcome is not None else Outcome()
        self.published: list[str] = []  # the status value of each ack produced, counted once confirmed

    @property
    def expected(self) -> bool:
        """Whether any record was expected (``done`` then settles, whatever happens to them)."""
        return self._count > 0

    @property
    def waiting(self) -> bool:
        """Whether records are tracked and nothing is decided yet."""
        return self._left > 0 and not self.done.done()

    def expect(self) -> None:
        """One more record to wait for; its delivery report calls ``delivered`` (or its waiter ``settled``)."""
        self._count += 1
        self._left += 1

    def delivered(self, err: KafkaError | None, _msg: Message) -> None:
        """A record's delivery report (``inturn.kafka.Delivered``): confirmed when ``err`` is None."""
        self.settled(None if err is None else KafkaClientError(err))

    def settled(self, error: BaseException | None) -> None:
        """One record is done: counted down when confirmed (``error`` None), else the wait ends with Kafka's
        refusal. Nothing changes once the request is decided (a late report after its deadline)."""
        if self.done.done():
            return
        if error is not None:
            failure = KafkaNotConfirmedError(f"Kafka refused a record: {error}")
            failure.__cause__ = error
            self.done.set_result(failure)
            return
        self._left -= 1
        if self._left == 0:
            self.done.set_result(None)

    def expire(self) -> None:
        """The deadline passed: end the wait (the records stay on their way and may still be confirmed)."""
        if not self.done.done():
            self.done.set_result(
                KafkaNotConfirmedError(f"{self._left} of {self._count} records not confirmed in {self._timeout}s")
            )

    async def wait(self) -> None:
        """Return once every record is confirmed; ``KafkaNotConfirmedError`` otherwise."""
        error = await self.done
        if error is not None:
            raise error


class Deadlines:
    """The requests waiting for Kafka, oldest first, and one timer that expires them at their deadline.

    Every ``Confirmation`` has the same timeout, so appending keeps the queue in deadline order. Requests
    confirmed in time leave the queue when they reach its front: at the next ``watch`` (Kafka confirms about in
    the order requests came, so the queue holds about the requests in flight), or at the timer.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: deque[Confirmation] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        """Requests in the queue (waiting, or settled behind one that waits)."""
        return len(self._queue)

    def watch(self, confirmation: Confirmation) -> None:
        """Expire ``confirmation`` at its deadline unless it is settled before."""
        queue = self._queue
        # Without this, every request stayed queued (its future, outcome and lists alive) until the timer reached
        # it, a whole timeout later: at 10,000 callbacks/s and the default 5 s, 50,000 requests, which the
        # garbage collector walked again and again (measured in process: 2-3 µs of its time per callback).
        while queue and not queue[0].waiting:
            queue.popleft()
        queue.append(confirmation)
        if self._timer is None:
            self._timer = self._loop.call_at(confirmation.deadline, self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = self._loop.time()
        queue = self._queue
        while queue:
            oldest = queue[0]
            if oldest.waiting:
                if oldest.deadline > now:
                    self._timer = self._loop.call_at(oldest.deadline, self._expire)
                    return
                oldest.expire()
            queue.popleft()

    def close(self) -> None:
        """Expire every request still waiting and stop the timer (shutdown)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._queue:
            self._queue.popleft().expire()
