"""A hypothesis state machine over one room's sender loop (the real ``Rooms`` and ``AckRouter``).

The platform's answers and the acks are rules hypothesis interleaves freely: a send returns (ok,
429, 5xx, 4xx), an ack arrives (for the message in flight — before or after its send returned —,
again for one already finished, or after its timeout), the ack timeout fires. Invariants: at most
one message in flight, sends in room order, every message terminal exactly once.

Kafka and PostgreSQL are replaced by in-memory recorders here because this pins the state machine
alone; the same code runs against the real services in the other worker tests.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from inturn.errors import PermanentPlatformError, TransientPlatformError
from inturn.platforms import PlatformAdapter, PreparedSend, SendResult
from inturn.schemas import TERMINAL_EVENTS, AckStatus, DeadLetter, EventType, Message, encode, now_ms
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import eventually
from inturn_worker.acks import AckRouter
from inturn_worker.dead_letters import DeadLetters
from inturn_worker.events import EventLog
from inturn_worker.partition import Entry, Partition
from inturn_worker.room import Delivery, Rooms
from tests.support.messages import ack

MESSAGES = 6


class Platform(PlatformAdapter):
    """Each send waits until the state machine answers it."""

    name = "whatsapp"

    def __init__(self) -> None:
        self.pending: tuple[str, asyncio.Future[SendResult]] | None = None
        self.concurrent = 0
        self.max_concurrent = 0
        self.accepted: list[str] = []

    def prepare(self, message: Message, partition: int | None = None) -> PreparedSend:
        return PreparedSend(url="sim://", body=message.message_id.encode(), account="acct", headers={})

    def parse_accepted(self, body: bytes) -> SendResult:
        raise NotImplementedError

    async def send(self, prepared: PreparedSend, gate: Callable[[], bool] | None = None) -> SendResult:
        future: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        self.pending = (prepared.body.decode(), future)
        self.concurrent += 1
        self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            return await future
        finally:
            self.concurrent -= 1
            self.pending = None


class Recorder(EventLog):
    """Keeps events and dead letters in memory."""

    def __init__(self) -> None:
        self.events: list[tuple[EventType, str]] = []

    def emit(
        self, type_: EventType, room_id: str, message_id: str, platform: str, partition: int, offset: int, **fields: Any
    ) -> None:
        self.events.append((type_, message_id))

    def dead_letter(self, letter: DeadLetter, key: str | None) -> None:
        pass


class MemoryStore:
    """What dead letters ask of PostgreSQL, in memory (nothing is ever blocked)."""

    async def dead_letter(self, letter: DeadLetter) -> None:
        pass

    async def block(self, room_id: str, reason: str) -> None:
        pass

    async def is_blocked(self, room_id: str) -> bool:
        return False


def rooms_of(
    settings: WorkerSettings, part: Partition, platform: PlatformAdapter, events: EventLog, router: AckRouter
) -> Rooms:
    """The real rooms and delivery over one partition and one platform, with the event log given and an in-memory
    store."""
    delivery = Delivery(
        settings, {platform.name: platform}, events, router, DeadLetters(settings, events, MemoryStore())
    )
    return Rooms(settings, {part.partition: part}, delivery)


class RoomMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.platform = Platform()
        self.recorder = Recorder()
        self.router = AckRouter(early_ttl_s=3600)
        cfg = WorkerSettings(
            worker_ack_timeout_ms=3_600_000,
            worker_retry_base_ms=1,
            worker_retry_cap_ms=1,
            worker_retry_max_attempts=3,
            worker_rate_limit_per_s=1e9,
            worker_rate_burst=10**9,
            worker_breaker_min_calls=10**6,
        )
        self.part = Partition(0, lease_s=3600)
        self.rooms = rooms_of(cfg, self.part, self.platform, self.recorder, self.router)
        self.part.claimed(1)
        self.part.durable([], 0, time.monotonic())  # a lease, as a checkpoint round grants it
        self.part.acks_caught_up()
        self.sent_ok: list[str] = []  # message ids whose send returned 2xx, in order
        self.wamids: dict[str, str] = {}
        self._run(self._enqueue_all())

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def _enqueue_all(self) -> None:
        for n in range(MESSAGES):
            msg = Message(
                room_id="R", message_id=f"m{n}", platform="whatsapp", recipient="r", payload={}, created_at_ms=now_ms()
            )
            self.part.consumed(n)
            self.rooms.enqueue(Entry.of(self.part, n, encode(msg), msg, now_ms()))
        await self._settle()

    async def _settle(self) -> None:
        """Run the loop until the room waits on the platform: a send to answer, an ack to give, or done.

        (A retry's backoff sleeps for real, so this waits for a state, not for a number of steps.)"""

        async def waiting_or_done() -> bool:
            await asyncio.sleep(0)
            self._checkpoint_round()
            room = self.part.rooms.get("R")
            idle = room is not None and room.wakeup is not None  # its loop waits for a next message
            running = not idle and any(t.get_name() == "R" and not t.done() for t in asyncio.all_tasks())
            return not running or self.platform.pending is not None or self._in_flight() is not None

        await eventually(waiting_or_done, 5, "the room finished or waiting on the platform", every=0.0005)
        for _ in range(20):  # let callbacks of the state just reached run out
            await asyncio.sleep(0)

    def _checkpoint_round(self) -> None:
        """What the worker's checkpoint does for the partition when a round succeeds."""
        written, upto = self.part.pending()
        self.part.durable(written, upto, time.monotonic())

    def _terminal(self) -> Counter[str]:
        return Counter(mid for kind, mid in self.recorder.events if kind in TERMINAL_EVENTS)

    def _in_flight(self) -> str | None:
        """The message sent and waiting for its ack (2xx returned, not terminal)."""
        terminal = self._terminal()
        waiting = [m for m in self.sent_ok if m not in terminal]
        return waiting[0] if waiting else None

    def _ack(self, message_id: str, status: AckStatus = AckStatus.SENT, by_message_id: bool = True) -> None:
        wamid = self.wamids.get(message_id, f"wamid-{message_id}")
        self.router.route(ack("R", message_id if by_message_id else None, wamid, status))

    # --- rules ---------------------------------------------------------------------------------------

    @precondition(lambda self: self.platform.pending is not None)
    @rule(answer=st.sampled_from(["ok", "ok", "ok", "429", "500", "400"]))
    def send_returns(self, answer: str) -> None:
        assert self.platform.pending is not None
        message_id, future = self.platform.pending
        if answer == "ok":
            wamid = f"wamid-{message_id}-{len(self.sent_ok)}"
            self.wamids[message_id] = wamid
            self.sent_ok.append(message_id)
            future.set_result(SendResult(wamid))
        elif answer == "400":
            future.set_exception(PermanentPlatformError("HTTP 400: rejected", status=400))
        else:
            future.set_exception(TransientPlatformError(f"HTTP {answer}", status=int(answer)))
        self._run(self._settle())

    @precondition(lambda self: self.platform.pending is not None)
    @rule(by_message_id=st.booleans())
    def ack_before_the_send_returned(self, by_message_id: bool) -> None:
        assert self.platform.pending is not None
        message_id = self.platform.pending[0]
        if not by_message_id:
            # Matched by platform id, which the worker learns only when the send returns: an early ack.
            self.wamids[message_id] = f"wamid-{message_id}-{len(self.sent_ok)}"
        self._ack(message_id, by_message_id=by_message_id)
        self._run(self._settle())

    @precondition(lambda self: self._in_flight() is not None)
    @rule(
        status=st.sampled_from([AckStatus.SENT, AckStatus.DELIVERED, AckStatus.READ, AckStatus.FAILED]),
        by_message_id=st.booleans(),
    )
    def ack_in_flight(self, status: AckStatus, by_message_id: bool) -> None:
        message_id = self._in_flight()
        assert message_id is not None
        self._ack(message_id, status, by_message_id)
        self._run(self._settle())

    @precondition(lambda self: self._in_flight() is not None)
    @rule()
    def ack_timeout_fires(self) -> None:
        message_id = self._in_flight()
        future = self.router._waiting.get(("R", message_id or ""))  # what the timer's callback does
        if future is not None and not future.done():
            future.set_result(None)
        self._run(self._settle())

    @precondition(lambda self: len(self._terminal()) > 0)
    @rule(data=st.data())
    def ack_again_for_a_finished_message(self, data: st.DataObject) -> None:
        finished = sorted(self._terminal())
        self._ack(data.draw(st.sampled_from(finished)))
        self._run(self._settle())

    # --- invariants ----------------------------------------------------------------------------------

    @invariant()
    def at_most_one_send_in_flight(self) -> None:
        assert self.platform.max_concurrent <= 1

    @invariant()
    def sends_in_room_order_each_after_the_previous_is_terminal(self) -> None:
        order = [int(m[1:]) for m in self.sent_ok]
        assert order == sorted(order)
        terminal = self._terminal()
        for message_id in self.sent_ok:
            n = int(message_id[1:])
            assert all(f"m{k}" in terminal for k in range(n)), f"{message_id} sent before m{n - 1} ended"

    @invariant()
    def never_more_than_one_terminal_outcome(self) -> None:
        assert all(count == 1 for count in self._terminal().values())

    def teardown(self) -> None:
        # Drive the room to the end: answer every send, time out every wait; then all must be terminal once.
        for _ in range(10 * MESSAGES):
            if self.platform.pending is not None:
                self.send_returns("ok")
            elif self._in_flight() is not None:
                self.ack_timeout_fires()
        assert self._terminal() == Counter({f"m{n}": 1 for n in range(MESSAGES)})
        assert self.part.committable() == MESSAGES
        self._run(self.rooms.close())
        self.loop.close()


TestRoomStateMachine = RoomMachine.TestCase
TestRoomStateMachine.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
