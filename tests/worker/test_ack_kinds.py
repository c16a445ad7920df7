"""What a room waits for after a send, by its platform's ack kind (``inturn.platforms.AckKind``): a watermark
callback (Messenger) resolves the in-flight message when it covers that send and nothing when it is older; the
send's answer is the ack for a synchronous platform (Telegram, Instagram), so the next message goes at once."""

from __future__ import annotations

import time

from inturn.platforms import AckKind, SendResult
from inturn.schemas import Ack, AckStatus, EventType, Message, encode, now_ms
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import eventually
from inturn_worker.acks import AckRouter, Routed
from inturn_worker.partition import Entry, Partition
from inturn_worker.room import Rooms
from tests.support.messages import ack
from tests.worker.test_room_state_machine import Platform, Recorder, rooms_of


class Messenger(Platform):
    name = "messenger"
    ack_kind = AckKind.WATERMARK


class Telegram(Platform):
    name = "telegram"
    ack_kind = AckKind.SYNCHRONOUS


def _watermark(room: str, watermark_ms: int) -> Ack:
    """What the webhook publishes for a Messenger delivery callback without ``mids``."""
    pmid, at = f"watermark.{room}.{watermark_ms}", watermark_ms
    return ack(room, None, pmid, AckStatus.DELIVERED, platform="messenger", platform_ts_ms=at, watermark_ms=at)


def _started(platform: Platform, router: AckRouter) -> tuple[Rooms, Partition, Recorder]:
    part = Partition(0, lease_s=60)
    part.claimed(1)
    part.durable([], 0, time.monotonic())  # a lease, as a checkpoint round grants one
    part.acks_caught_up()
    recorder = Recorder()
    settings = WorkerSettings(worker_ack_timeout_ms=3_600_000)
    rooms = rooms_of(settings, part, platform, recorder, router)
    return rooms, part, recorder


def _enqueue(rooms: Rooms, part: Partition, platform: str, count: int) -> None:
    for n in range(count):
        message = Message(
            room_id="R", message_id=f"m{n}", platform=platform, recipient="r", payload={}, created_at_ms=1
        )
        part.consumed(n)
        rooms.enqueue(Entry.of(part, n, encode(message), message, now_ms()))


async def _answer(platform: Platform, body: str, result: SendResult) -> None:
    await eventually(
        lambda: platform.pending is not None and platform.pending[0] == body, 5, "the room loop got there", every=0
    )
    assert platform.pending is not None
    platform.pending[1].set_result(result)


async def test_watermarks_resolve_a_rooms_messages_in_turn_and_an_older_one_resolves_nothing() -> None:
    platform, router = Messenger(), AckRouter(early_ttl_s=60)
    rooms, part, recorder = _started(platform, router)
    _enqueue(rooms, part, "messenger", 3)

    await _answer(platform, "m0", SendResult("mid.0", sent_at_ms=1_000))
    await eventually(lambda: ("R", "m0") in router._waiting_pmid.values(), 5, "the room loop got there", every=0)
    assert router.route(_watermark("R", 999))[0] is Routed.DUPLICATE, "older than m0's send: confirms nothing"
    assert recorder.events == []
    assert router.route(_watermark("R", 1_000))[0] is Routed.RESOLVED  # at m0's send time: covered
    await _answer(platform, "m1", SendResult("mid.1", sent_at_ms=2_000))
    # The same callback again (m0's watermark) while m1 is in flight: m1 was sent after it, nothing resolves.
    await eventually(lambda: ("R", "m1") in router._waiting_pmid.values(), 5, "the room loop got there", every=0)
    assert router.route(_watermark("R", 1_000))[0] is Routed.DUPLICATE
    assert recorder.events == [(EventType.ACKED, "m0")]
    # One delivery callback whose watermark covers m1 and m2 (sent later): m1 now, m2 as soon as its send returns.
    covering = _watermark("R", 3_500)
    assert router.route(covering)[0] is Routed.RESOLVED
    await eventually(
        lambda: platform.pending is not None and platform.pending[0] == "m2", 5, "the room loop got there", every=0
    )
    assert router.route(covering)[0] is Routed.EARLY, "before m2's send returned: kept for it"
    await _answer(platform, "m2", SendResult("mid.2", sent_at_ms=3_000))
    await eventually(lambda: len(recorder.events) == 3, 5, "the room loop got there", every=0)
    assert recorder.events == [(EventType.ACKED, "m0"), (EventType.ACKED, "m1"), (EventType.ACKED, "m2")]
    await rooms.close()


async def test_a_synchronous_platform_sends_the_next_message_when_the_previous_send_returned() -> None:
    platform, router = Telegram(), AckRouter(early_ttl_s=60)
    rooms, part, recorder = _started(platform, router)
    _enqueue(rooms, part, "telegram", 3)
    for n in range(3):
        await _answer(platform, f"m{n}", SendResult(str(100 + n)))
    await eventually(lambda: len(recorder.events) == 3, 5, "the room loop got there", every=0)
    assert recorder.events == [(EventType.ACKED, "m0"), (EventType.ACKED, "m1"), (EventType.ACKED, "m2")]
    assert router._waiting == {}, "nothing waited for a webhook"
    assert part.committable() == 3
    await rooms.close()
