"""In turn, nothing lost, rooms isolated: judged from what reached the platform, not the worker's counters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from inturn.schemas import TERMINAL_EVENTS, EventType
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import eventually
from tests.support.messages import text_message
from tests.worker.harness import (
    ScriptedPlatform,
    committed,
    events,
    produce,
    running_worker,
    terminal_by_message,
)

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


async def test_interleaved_queue_reaches_the_platform_in_room_order_and_a_silent_room_delays_no_other(
    inturn_topics: KafkaSettings, platform: ScriptedPlatform, test_id: str, make_settings: Callable[..., WorkerSettings]
) -> None:
    # The queue A7 B3 A6 A5 C5 C4 B2: room order is the order of the queue, whatever the labels say.
    queue = ["A7", "B3", "A6", "A5", "C5", "C4", "B2"]
    platform.behaviour["A"].withhold = True  # room A's acks never come: each of its messages times out
    produce(inturn_topics, [text_message(label[0], f"{test_id}-{label}", recipient=label[0]) for label in queue])
    settings = make_settings(worker_ack_timeout_ms=2000)
    async with running_worker(settings):
        await eventually(lambda: len(platform.receipts) == len(queue), 30, "every message sent")
    order = platform.order()
    assert order == {
        "A": [f"{test_id}-A7", f"{test_id}-A6", f"{test_id}-A5"],
        "B": [f"{test_id}-B3", f"{test_id}-B2"],
        "C": [f"{test_id}-C5", f"{test_id}-C4"],
    }
    at = {r.message_id.split("-")[1]: r.at for r in platform.receipts}
    # A6 went out only after A7's 2 s ack timeout; B and C were done long before that.
    assert at["A6"] - at["A7"] >= 2.0
    assert max(at["B2"], at["C4"]) < at["A7"] + 2.0
    evts = await events(inturn_topics, expect_terminal=len(queue))
    # One event per message outcome, and it tells the message's whole story.
    assert [e.type for e in evts if e.type not in TERMINAL_EVENTS] == []
    for e in evts:
        assert e.created_at_ms is not None
        assert e.consumed_at_ms is not None
        assert e.sent_at_ms is not None
        assert e.platform_message_id
        assert e.attempt == 1
        assert e.created_at_ms <= e.consumed_at_ms <= e.sent_at_ms <= e.ts_ms
    terminal = terminal_by_message(evts)
    assert {k.split("-")[1]: v for k, v in terminal.items()} == {
        "A7": [EventType.ACK_TIMEOUT],
        "A6": [EventType.ACK_TIMEOUT],
        "A5": [EventType.ACK_TIMEOUT],
        "B3": [EventType.ACKED],
        "B2": [EventType.ACKED],
        "C5": [EventType.ACKED],
        "C4": [EventType.ACKED],
    }


async def test_with_15_percent_of_acks_lost_every_message_ends_acked_or_timed_out_in_order_and_offsets_reach_the_end(
    inturn_topics: KafkaSettings, platform: ScriptedPlatform, make_settings: Callable[..., WorkerSettings]
) -> None:
    rooms = [f"r{i}" for i in range(40)]
    per_room = 8
    for room in rooms:
        platform.behaviour[room].drop_rate = 0.15
        platform.behaviour[room].ack_delay_s = 0.02
    produced = [text_message(room, f"{room}-{n}") for n in range(per_room) for room in rooms]
    produce(inturn_topics, produced)
    # 2 s: an ack 20 ms after its send must not time out on a loaded machine (each lost one costs its room 2 s).
    settings = make_settings(worker_ack_timeout_ms=2000)
    group = settings.worker_group_id
    async with running_worker(settings):
        await eventually(lambda: len(platform.receipts) == len(produced), 60, "every message sent")
        terminal = terminal_by_message(await events(inturn_topics, expect_terminal=len(produced)))
        await eventually(
            lambda: committed(inturn_topics, group) == len(produced), 20, "committed offsets at the end", blocking=True
        )
    assert platform.order() == {room: [f"{room}-{n}" for n in range(per_room)] for room in rooms}
    assert {k: v for k, v in terminal.items() if len(v) != 1} == {}, "exactly one terminal outcome per message"
    assert set(terminal) == {m.message_id for m in produced}
    kinds = [k[0] for k in terminal.values()]
    timeouts = kinds.count(EventType.ACK_TIMEOUT)
    assert kinds.count(EventType.ACKED) + timeouts == len(produced)
    # The platform dropped acks of about 15% (seeded): each of those, and only those, timed out.
    assert timeouts == len(produced) - platform.acks_published


async def test_a_room_never_acked_does_not_hold_back_a_thousand_messages_of_other_rooms(
    inturn_topics: KafkaSettings, platform: ScriptedPlatform, make_settings: Callable[..., WorkerSettings]
) -> None:
    platform.behaviour["slow"].withhold = True
    others = [text_message(f"o{i}", f"o{i}-{n}") for n in range(5) for i in range(200)]
    produce(inturn_topics, [text_message("slow", f"slow-{n}") for n in range(3)] + others)
    settings = make_settings(worker_ack_timeout_ms=10_000)
    async with running_worker(settings):
        started = asyncio.get_running_loop().time()
        await eventually(lambda: len(platform.receipts) == len(others) + 1, 30, "all other rooms delivered")
        # The silent room sent its first message and waits; it has not reached its second.
        assert asyncio.get_running_loop().time() - started < 10
        assert [r.message_id for r in platform.receipts if r.room_id == "slow"] == ["slow-0"]
