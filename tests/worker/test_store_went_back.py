"""A checkpoint round that finds PostgreSQL went back in time (restored from a copy, a replica behind) says so: a
``store_went_back`` warning per partition and ``inturn_worker_store_went_back_total``; the partition renews no lease
and commits nothing on that round, and goes on with the next once its epoch was raised back (or stops, fenced, when
another owner claimed its number meanwhile). The store's side is tests/worker/test_store_checkpoint.py."""

from __future__ import annotations

from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from inturn.db.store import Checked, CursorUpdate, WentBack
from inturn.settings.worker import WorkerSettings
from inturn_worker.checkpoint import Checkpoint
from inturn_worker.partition import Partition

METRIC = "inturn_worker_store_went_back_total"


class _Events:
    async def confirm(self, wait_s: float, hurry: bool = False) -> bool:
        return True

    def poll(self) -> None:
        pass


class _Rooms:
    active = 0

    def stuck(self) -> int:
        return 0


class _Store:
    """Answers each round with the next of ``answers`` (then plain rounds); records what each round wrote."""

    def __init__(self, *answers: Checked) -> None:
        self._answers = list(answers)
        self.rounds: list[tuple[list[CursorUpdate], dict[int, int], str]] = []

    async def claim(self, partitions: list[int], owner: str) -> dict[int, int]:
        return {}

    async def checkpoint(self, updates: list[CursorUpdate], epochs: dict[int, int], owner: str) -> Checked:
        self.rounds.append((updates, epochs, owner))
        return self._answers.pop(0) if self._answers else Checked(set(), {})


def _partition() -> Partition:
    part = Partition(0, lease_s=60)
    part.claimed(3)
    part.consumed(0)
    part.finished("R", 0, "m0", "acked")
    return part


def _went_back_total() -> float:
    return REGISTRY.get_sample_value(METRIC) or 0.0


async def test_an_epoch_found_below_ours_is_logged_counted_and_renews_nothing_until_the_next_round() -> None:
    part = _partition()
    store = _Store(Checked(set(), {0: WentBack(1, "w2")}))
    checkpoint = Checkpoint(WorkerSettings(worker_id="w1"), {0: part}, _Rooms(), _Events(), store)
    before = _went_back_total()
    with capture_logs() as logs:
        allowed = await checkpoint.once()
    assert [e for e in logs if e["event"] == "store_went_back"] == [
        {
            "event": "store_went_back",
            "log_level": "warning",
            "partition": 0,
            "epoch_held": 3,
            "epoch_found": 1,
            "owner_found": "w2",
            "action": "epoch_raised",
        }
    ]
    assert _went_back_total() == before + 1
    assert allowed == {}, "nothing committed on the round that found the store behind"
    assert [(u.room_id, u.offset) for u in part.pending()[0]] == [("R", 0)], "not durable yet"
    assert not part.fenced
    assert store.rounds[0][1:] == ({0: 3}, "w1")

    with capture_logs() as logs:
        allowed = await checkpoint.once()  # the epoch is ours again
    assert [e for e in logs if e["event"] == "store_went_back"] == []
    assert _went_back_total() == before + 1
    assert allowed == {0: 1}
    assert part.pending()[0] == []
    assert [(u.room_id, u.offset) for u in store.rounds[1][0]] == [("R", 0)], "written again under the raised epoch"


async def test_our_number_claimed_by_another_after_the_store_went_back_fences_the_partition() -> None:
    part = _partition()
    store = _Store(Checked({0}, {0: WentBack(3, "w2")}))
    checkpoint = Checkpoint(WorkerSettings(worker_id="w1"), {0: part}, _Rooms(), _Events(), store)
    before = _went_back_total()
    with capture_logs() as logs:
        allowed = await checkpoint.once()
    went_back = [e for e in logs if e["event"] == "store_went_back"]
    assert [(e["partition"], e["epoch_held"], e["epoch_found"], e["action"]) for e in went_back] == [
        (0, 3, 3, "fenced")
    ]
    assert [e["event"] for e in logs if e["event"] == "partition_fenced"] == ["partition_fenced"]
    assert _went_back_total() == before + 1
    assert part.fenced
    assert allowed == {}
