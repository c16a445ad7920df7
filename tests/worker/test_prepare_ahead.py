"""Pipelined preparation: a room's next messages are rendered before their turn, sends stay in order."""

from __future__ import annotations

import asyncio

from inturn.errors import PermanentPlatformError
from inturn.platforms import PreparedSend
from inturn.schemas import Message, encode, now_ms
from inturn.settings.worker import WorkerSettings
from inturn_worker.acks import AckRouter
from inturn_worker.partition import PartitionState
from inturn_worker.room import Entry, Rooms
from tests.worker.test_room_state_machine import MemoryStore, Platform, Recorder


class Counting(Platform):
    """Counts renders; refuses to render message ``m3``."""

    def __init__(self) -> None:
        super().__init__()
        self.rendered: list[str] = []

    def prepare(self, message: Message) -> PreparedSend:
        self.rendered.append(message.message_id)
        if message.message_id == "m3":
            raise PermanentPlatformError("no phone_number_id")
        return super().prepare(message)


def _message(n: int) -> Message:
    return Message(room_id="R", message_id=f"m{n}", platform="whatsapp", recipient="r", payload={}, created_at_ms=1)


async def _enqueued(ahead: int, count: int) -> tuple[list[Entry], Counting]:
    platform = Counting()
    rooms = Rooms(
        WorkerSettings(worker_prepare_ahead=ahead),
        {"whatsapp": platform},
        Recorder(),
        AckRouter(early_ttl_s=60),
        MemoryStore(),  # type: ignore[arg-type]
    )
    part = PartitionState(0, lease_s=60)
    entries = []
    for n in range(count):
        message = _message(n)
        entry = Entry.of(part, n, encode(message), message, now_ms())
        rooms.enqueue(entry, message)
        entries.append(entry)
    await rooms.close()  # the room's loop never ran: only what enqueue did is looked at
    return entries, platform


def test_messages_within_the_window_are_rendered_once_at_intake_and_the_rest_wait() -> None:
    entries, platform = asyncio.run(_enqueued(ahead=4, count=8))
    # The head and the 4 behind it (the loop renders that many ahead anyway); m3 failed to render.
    assert platform.rendered == ["m0", "m1", "m2", "m3", "m4"]
    bodies = [e.prepared.body if isinstance(e.prepared, PreparedSend) else e.prepared for e in entries]
    assert bodies[:3] == [b"m0", b"m1", b"m2"]
    assert isinstance(bodies[3], PermanentPlatformError)
    assert bodies[4] == b"m4"
    assert bodies[5:] == [None, None, None]


def test_no_window_renders_only_the_head() -> None:
    entries, platform = asyncio.run(_enqueued(ahead=0, count=3))
    assert platform.rendered == ["m0"]
    assert [e.prepared is not None for e in entries] == [True, False, False]
