"""Waiting for Kafka to confirm a request's records: one countdown per request, one timer for every deadline.

A request is answered 200 only once Kafka confirmed every record it produced, and 503 when that has not
happened within the confirm timeout. ``asyncio.wait`` per request cost a set, a waiter, a done-callback per
record and a timer per request; a future per record cost its creation and a loop callback per record. Here
each record's delivery report counts its request down directly (``Confirmation.delivered``), and since
a request waits on the shared deadline queue (``inturn.deadlines``): one loop timer for every request, and a
request confirmed in time lets go of its place at once. The guarantee is per request; only the waiting is
shared.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from confluent_kafka import KafkaError, Message

from inturn.deadlines import Deadline, Deadlines
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

    __slots__ = (
        "_count",
        "_left",
        "_timeout",
        "_watched",
        "deadline",
        "done",
        "outcome",
        "published",
        "started",
        "to_statuses",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float, outcome: Outcome | None = None) -> None:
        self.done: asyncio.Future[BaseException | None] = loop.create_future()
        self._count = 0
        self._left = 0
        self._timeout = timeout
        self.deadline = loop.time() + timeout
        self.started = time.monotonic()
        self.outcome = outcome if outcome is not None else Outcome()
        self.published: list[str] = []  # the status value of each ack produced, counted once confirmed
        self.to_statuses: list[str] = []  # the same, of each status produced to the statuses topic
        self._watched: tuple[Deadlines, Deadline] | None = None  # its place on the deadline queue (``watch``)

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

    def watch(self, deadlines: Deadlines) -> None:
        """Expire at the deadline unless settled before (then the request leaves ``deadlines`` at once)."""
        delay = self.deadline - self.done.get_loop().time()
        self._watched = (deadlines, deadlines.add(delay, Confirmation.expire, self))

    def settled(self, error: BaseException | None) -> None:
        """One record is done: counted down when confirmed (``error`` None), else the wait ends with Kafka's
        refusal. Nothing changes once the request is decided (a late report after its deadline)."""
        if self.done.done():
            return
        if error is not None:
            failure = KafkaNotConfirmedError(f"Kafka refused a record: {error}")
            failure.__cause__ = error
            self._decided(failure)
            return
        self._left -= 1
        if self._left == 0:
            self._decided(None)

    def _decided(self, result: BaseException | None) -> None:
        self.done.set_result(result)
        if self._watched is not None:
            deadlines, deadline = self._watched
            self._watched = None
            deadlines.cancel(deadline)

    def expire(self) -> None:
        """The deadline passed: end the wait (the records stay on their way and may still be confirmed)."""
        self._watched = None
        if not self.done.done():
            self.done.set_result(
                KafkaNotConfirmedError(f"{self._left} of {self._count} records not confirmed in {self._timeout}s")
            )

    async def wait(self) -> None:
        """Return once every record is confirmed; ``KafkaNotConfirmedError`` otherwise."""
        error = await self.done
        if error is not None:
            raise error
