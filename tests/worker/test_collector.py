"""What the worker keeps per message after its outcome stays out of the cyclic collector's sight.

The ack router remembers up to 200,000 finished messages and each partition holds a cursor change per room
until the next checkpoint round. Tracked by the collector, every one of them passed through its older
generations, which it then walked whole on each collection: a pause of the event loop (and so of every room)
that grew with the number of messages remembered.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from inturn_worker.acks import AckRouter
from inturn_worker.partition import Partition

MESSAGES = 2_000


def _tracked_growth(work: Callable[[], None]) -> int:
    """How many more objects the collector tracks after ``work()`` ran (tuples of atomics untracked first)."""
    gc.collect()
    before = len(gc.get_objects())
    work()
    gc.collect()
    return len(gc.get_objects()) - before


def test_finished_messages_are_not_tracked_by_the_collector() -> None:
    router = AckRouter(early_ttl_s=60.0)

    def finish_many() -> None:
        for i in range(MESSAGES):
            router.finish(
                f"room-{i}", f"m-{i}", f"wamid.{i}", timed_out=False, partition=0, offset=i, platform="whatsapp"
            )

    growth = _tracked_growth(finish_many)

    assert router.settled(f"room-{MESSAGES - 1}", f"m-{MESSAGES - 1}", None) == "whatsapp"  # still remembered
    assert growth < MESSAGES // 10, f"{growth} objects tracked for {MESSAGES} finished messages"


def test_cursor_changes_waiting_for_a_round_are_not_tracked_by_the_collector() -> None:
    part = Partition(0, lease_s=5.0)

    def finish_many() -> None:
        for i in range(MESSAGES):
            part.finished(f"room-{i}", i, f"m-{i}", "acked")

    growth = _tracked_growth(finish_many)

    changes, _ = part.pending()
    assert len(changes) == MESSAGES
    assert not gc.is_tracked(changes[0])
    assert growth < MESSAGES // 10, f"{growth} objects tracked for {MESSAGES} rooms' cursor changes"
