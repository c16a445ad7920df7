"""A message that went out twice never reaches the device after the room's next message.

A message can reach the platform twice: an attempt whose answer missed the send timeout (the platform had accepted
it) is retried, and a new owner of a partition sends again what its previous owner had in flight. The ack of one
copy says nothing of where the other is; had it released the room's next message, that message could overtake the
other copy on its way to the device (docs/reliability.md, problems 11 and 12). Judged by the receipt-log checker on
the scripted platform's device log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from msgspec.structs import replace

from inturn.platforms import SendResult
from inturn.schemas import EventType
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import eventually
from inturn_worker.acks import AckRouter, Routed
from tests.support.messages import text_message
from tests.worker.harness import (
    Copy,
    Receipt,
    ScriptedPlatform,
    ack_of,
    events,
    produce,
    publish_acks,
    running_worker,
    terminal_by_message,
)


@pytest.mark.kafka
@pytest.mark.postgres
async def test_a_message_sent_twice_never_reaches_the_device_after_the_rooms_next_message(
    inturn_topics: KafkaSettings, platform: ScriptedPlatform, make_settings: Callable[..., WorkerSettings]
) -> None:
    """Three rooms, one worker (send timeout 1 s), each room a way for a message to go out twice.

    - S: s0's first attempt reaches the device and is acked at once, but its answer comes 3 s later, past the send
      timeout. The worker has its ack before the retry is due: the platform has s0, and a retry would be a copy.
    - R: r0's first attempt reaches the device at once, but its answer misses the send timeout and its ack comes only
      after the worker wrote the retry; the retried copy takes 3 s to the device. Only the retried copy's ack may
      release r1 (problem 11: the first attempt's ack released it, and r1 overtook the retried r0).
    - K: the partition's previous owner sent k0 (it reached the device) and died before its ack came (kill -9); this
      worker, the next owner, finds no ack and sends k0 again (3 s to the device). The previous copy's ack, arriving
      after that, must not release k1 while this worker's copy is on its way (problem 12).
    """
    platform.behaviour["S"].copies.append(Copy(answer_after_s=3.0))
    platform.behaviour["R"].copies.extend([Copy(answer_after_s=5.0, ack_after_s=2.5), Copy(device_after_s=3.0)])
    previous = Receipt("K", "k0", "K", time.monotonic(), "wamid.previous-owner.k0")
    platform.device.append(previous)
    platform.behaviour["K"].copies.append(Copy(device_after_s=3.0))
    produced = {room: [f"{room.lower()}0", f"{room.lower()}1"] for room in ("S", "R", "K")}
    produce(inturn_topics, [text_message(room, mid) for room, mids in produced.items() for mid in mids])
    settings = make_settings(
        worker_send_timeout_ms=1000,
        worker_acks_fetch_wait_max_ms=10,
        worker_ack_timeout_ms=10_000,
    )
    async with running_worker(settings):
        await eventually(lambda: "k0" in {r.message_id for r in platform.receipts}, 30, "this worker sent k0")
        await asyncio.to_thread(publish_acks, inturn_topics, [platform.ack(previous)])
        evts = await events(inturn_topics, expect_terminal=6)
        await eventually(lambda: len(platform.device) == len(platform.receipts) + 1, 10, "every copy at the device")
    report = platform.check(produced)
    assert (report.lost, report.reordered) == (0, 0), report.summary()
    # S: not sent again. R: at most the retried copy, written before the first attempt's ack came. K: this worker's.
    assert {room: report.rooms[room].duplicated for room in produced} in (
        {"S": 0, "R": 1, "K": 1},
        {"S": 0, "R": 0, "K": 1},
    ), report.summary()
    assert [mid for mid, _, _ in platform.attempts if mid.startswith("s")] == ["s0", "s1"], "s0 was not sent again"
    assert terminal_by_message(evts) == {mid: [EventType.ACKED] for mids in produced.values() for mid in mids}
    acked = next(e for e in evts if e.type is EventType.ACKED and e.message_id == "s0")
    assert (acked.attempt, acked.sent_at_ms is not None) == (1, True), "its event tells the attempt that went out"


async def test_only_the_ack_of_the_copy_sent_resolves_it_and_the_other_copys_ack_resolves_nothing() -> None:
    router = AckRouter(early_ttl_s=60)
    mine = ack_of("R", 0)  # platform id wamid.R.0
    other = replace(ack_of("R", 0), platform_message_id="wamid.other-copy")

    # Sent and answered: another copy's ack is not this copy's.
    future = router.expect("R", "R#0")
    assert router.sent("R", "R#0", SendResult("wamid.R.0")) is future
    assert router.route(other)[0] is Routed.DUPLICATE
    assert not future.done()
    assert router.route(mine)[0] is Routed.RESOLVED
    assert future.result() is mine

    # Another copy's ack came while this copy was being sent (before its answer): the send waits on a new future,
    # and this copy's ack, come early too, resolves it.
    router.finish("R", "R#0", "wamid.R.0", timed_out=False, partition=0, offset=0, platform="whatsapp")
    first = router.expect("R", "R#1")
    assert router.route(replace(ack_of("R", 1), platform_message_id="wamid.other-copy.1"))[0] is Routed.RESOLVED
    assert router.route(ack_of("R", 1))[0] is Routed.EARLY  # wamid.R.1: maybe this copy's, kept by its platform id
    second = router.sent("R", "R#1", SendResult("wamid.R.1"))
    assert second is not None
    assert second is not first
    resolved = second.result() if second.done() else None
    assert resolved is not None
    assert resolved.platform_message_id == "wamid.R.1"
