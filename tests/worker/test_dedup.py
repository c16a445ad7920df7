"""Nothing twice at the device: a second copy of a message (a producer that wrote it twice, at another offset) is
recognised by its id among the room's recent sends, recorded as a duplicate and never sent; judged from what
reached the platform."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from inturn.schemas import EventType
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import eventually
from inturn_worker.partition import Partition, holds_digest, message_digest
from tests.support.messages import text_message
from tests.worker.harness import (
    ScriptedPlatform,
    events,
    produce,
    read_topic,
    running_worker,
    terminal_by_message,
)


@pytest.mark.kafka
@pytest.mark.postgres
async def test_copies_written_again_at_later_offsets_reach_the_platform_once_also_after_a_restart(
    inturn_topics: KafkaSettings, platform: ScriptedPlatform, test_id: str, make_settings: Callable[..., WorkerSettings]
) -> None:
    def ids(*labels: str) -> list[str]:
        return [f"{test_id}-{label}" for label in labels]

    room = f"D{test_id}"
    first = ids("d1", "d2", "d1", "d3", "d2")  # d1 and d2 written twice, as a bridge does after a crash
    produce(inturn_topics, [text_message(room, m) for m in first])
    settings = make_settings()
    async with running_worker(settings):
        await eventually(lambda: len(platform.receipts) == 3, 30, "d1, d2 and d3 sent")
        await eventually(lambda: _terminal_count(inturn_topics, 5), 30, "five terminal events", blocking=True)
    # A new worker reads the room's recent ids from its cursor in PostgreSQL: a late copy of d3 is still known.
    second = ids("d3", "d4")
    produce(inturn_topics, [text_message(room, m) for m in second])
    async with running_worker(settings):
        await eventually(lambda: len(platform.receipts) == 4, 30, "d4 sent")
        evts = await events(inturn_topics, expect_terminal=7)

    assert platform.order() == {room: ids("d1", "d2", "d3", "d4")}
    terminal = terminal_by_message(evts)
    assert terminal == {
        ids("d1")[0]: [EventType.ACKED, EventType.SKIPPED_DUPLICATE],
        ids("d2")[0]: [EventType.ACKED, EventType.SKIPPED_DUPLICATE],
        ids("d3")[0]: [EventType.ACKED, EventType.SKIPPED_DUPLICATE],
        ids("d4")[0]: [EventType.ACKED],
    }
    skipped = [e for e in evts if e.type is EventType.SKIPPED_DUPLICATE]
    assert {e.detail for e in skipped} == {"message id among the room's recent sends"}


def _terminal_count(settings: KafkaSettings, expected: int) -> bool:
    values = read_topic(settings, settings.topic_events, expect=expected, timeout=2)
    return len(values) >= expected


def test_the_window_keeps_the_last_n_sent_ids_and_never_a_dead_letter() -> None:
    part = Partition(0, lease_s=60, dedup_window=2)
    for offset, message_id in enumerate(["m1", "m2", "m3"]):
        part.consumed(offset)
        part.finished("R", offset, message_id, "acked")
    assert [part.sent_before("R", m) for m in ("m1", "m2", "m3")] == [False, True, True]
    part.consumed(3)
    part.finished("R", 3, "m4", "dead_lettered", sent=False)  # a replay of it must go out
    assert not part.sent_before("R", "m4")
    assert part.sent_before("R", "m3")
    assert not part.sent_before("other room", "m3")
    # What the checkpoint writes carries the window as it stood at that message.
    assert part.pending()[0][0].recent == message_digest("m2") + message_digest("m3")


def test_a_window_of_zero_remembers_nothing() -> None:
    part = Partition(0, lease_s=60, dedup_window=0)
    part.consumed(0)
    part.finished("R", 0, "m1", "acked")
    assert not part.sent_before("R", "m1")
    assert part.pending()[0][0].recent == b""


def test_a_digest_matches_only_at_a_digest_boundary() -> None:
    a, b = message_digest("a"), message_digest("b")
    straddling = a[4:] + b[:4]  # present in a + b, but across the two digests
    assert holds_digest(a + b, b)
    assert not holds_digest(a + b, straddling)
    assert holds_digest(a + b + straddling, straddling)
