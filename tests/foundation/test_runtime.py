"""Process-wide tuning: the garbage collector settings the worker applies at start-up."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from inturn.runtime import tune_gc


@pytest.fixture
def collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("collector")
def test_tuning_freezes_what_exists_and_raises_only_the_young_threshold() -> None:
    _, middle, old = gc.get_threshold()
    built_at_start_up: dict[str, list[int]] = {"k": []}
    assert any(o is built_at_start_up for o in gc.get_objects())
    tune_gc(12_345)
    assert gc.get_threshold() == (12_345, middle, old)
    assert gc.get_freeze_count() > 0
    # Frozen objects are in no generation: the collections never walk them again.
    assert not any(o is built_at_start_up for o in gc.get_objects())


@pytest.mark.usefixtures("collector")
def test_zero_leaves_the_collector_as_it_is() -> None:
    before = gc.get_threshold()
    tune_gc(0)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("collector")
def test_a_cycle_made_after_tuning_is_still_collected_by_the_collector_itself() -> None:
    tune_gc(1_000)

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    gone: list[str] = []
    weakref.finalize(a, gone.append, "a")
    del a, b
    assert gone == [], "a cycle outlives its last reference until a collection"
    # More net allocations than the young threshold: the collector runs on its own and frees the cycle.
    kept: list[list[int]] = [[] for _ in range(5_000)]
    assert gone == ["a"]
    assert len(kept) == 5_000
