"""The fault matrix, worker rows: workers killed, frozen, restarted and churned while a run is in progress.

Each test is one scenario of docs/reliability.md; it prints a ``chaos:`` line with lost, reordered,
duplicates, the duplicate bound and the drain time, and asserts the targets (0 lost, 0 reordered,
duplicates within 1 per room of the partitions each fault touched).
"""

from __future__ import annotations

import json
import time

import pytest

from inturn_devtools.pipeline import Pipeline
from inturn_devtools.waiting import wait_until
from tests.chaos.conftest import (
    Scenario,
    assert_target,
    freeze_inside_a_transaction,
    judge,
    owned_partitions,
    progress,
    rooms_of,
)

pytestmark = [pytest.mark.chaos, pytest.mark.kafka, pytest.mark.postgres]

#: The large run: the issue's 100k messages over 5k rooms. On this 2-core box (shared) the pipeline
#: delivers ~500 messages/s in ack mode, so it runs ~4 minutes with a kill every 10 s; the other rows
#: use 1000 rooms, which keeps the whole matrix near 15 minutes.
BIG_ROOMS, BIG_PER_ROOM = 5000, 20
ROOMS, PER_ROOM = 1000, 6  # the single-fault scenarios


#: The kill -9 row's workers: each names itself in the receipt log (``/_via/{name}``), so a copy sent again shows
#: which owner sent it, and a send timeout of 30 s, as the platform rows (tests/chaos/test_platform_faults.py): on
#: this shared box the simulator read some requests more than 10 s after they were written, after the worker had
#: retried them and sent the room's next message (docs/reliability.md, problems 11 and 12).
KILL_ROW_WORKER = {"INTURN_WORKER_SEND_TIMEOUT_MS": "30000"}


def replace(line: Pipeline, names: list[str], index: int, generation: int, *, via: bool = False) -> str:
    """Start a fresh worker in place of ``names[index]``; returns its name. ``via``: as ``add_worker``."""
    name = f"{names[index].split('.')[0]}.{generation}"
    add_worker(line, name, via=via)
    names[index] = name
    return name


def add_worker(line: Pipeline, name: str, *, via: bool = False) -> None:
    """Start worker ``name``; with ``via``, one of the kill -9 row's (``KILL_ROW_WORKER``, sends through
    ``/_via/{name}``)."""
    if via:
        line.add_worker(name, INTURN_WHATSAPP_BASE_URL=f"{line.sim_url}/_via/{name}", **KILL_ROW_WORKER)
    else:
        line.add_worker(name)


@pytest.mark.timeout(900)
def test_kill_9_of_a_worker_every_10_s_over_5k_rooms_loses_and_reorders_nothing(chaos_pipeline: Pipeline) -> None:
    line = chaos_pipeline
    names = ["w1", "w2", "w3"]
    for name in names:
        add_worker(line, name, via=True)
    total = line.produce(rooms=BIG_ROOMS, per_room=BIG_PER_ROOM)
    scenario = Scenario("kill -9 a worker every 10 s", line, f"{BIG_ROOMS} rooms x {BIG_PER_ROOM}, 3 workers")
    kills, next_kill = 0, time.monotonic() + 10
    while not scenario.done(total):
        assert time.monotonic() - scenario.started < 700, line.report().summary()
        if time.monotonic() >= next_kill:
            index = kills % 3
            victim = names[index]
            owned = owned_partitions(line.postgres_dsn, line.topics.topic_messages, victim)
            line.workers[victim].kill()
            touched = rooms_of(owned, BIG_ROOMS, line.topics.topic_partitions)
            scenario.fault(f"kill -9 {victim} owning partitions {sorted(owned)}", len(touched), touched)
            kills += 1
            replace(line, names, index, kills, via=True)
            next_kill += 10
        time.sleep(1.0)  # pacing the faults and polling for the end
    scenario.wait_drained(total, 60)
    report = scenario.verdict()
    assert kills >= 2, "the run ended before a second kill: raise BIG_PER_ROOM"
    assert_target(scenario, report)


def test_a_worker_frozen_past_the_session_timeout_is_fenced_and_nothing_is_reordered(
    chaos_pipeline: Pipeline,
) -> None:
    line = chaos_pipeline
    for name in ("w1", "w2"):
        line.add_worker(name)
    total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
    scenario = Scenario("SIGSTOP a worker past the session timeout", line, f"{ROOMS} rooms x {PER_ROOM}, 2 workers")
    progress(scenario, 0.25, total)
    topic = line.topics.topic_messages
    # Freeze a member of a settled group: both workers own partitions (not w2 still joining).
    wait_until(
        lambda: owned_partitions(line.postgres_dsn, topic, "w1") and owned_partitions(line.postgres_dsn, topic, "w2"),
        60,
        "the group settled with both workers owning partitions",
        every=0.3,
    )
    frozen = line.workers["w1"]
    moved = owned_partitions(line.postgres_dsn, line.topics.topic_messages, "w1")
    # The hardest moment: inside its checkpoint round, holding the epochs' row locks that w2's claims need
    # (docs/reliability.md, problem 13).
    tries = freeze_inside_a_transaction(line, "w1")
    touched = rooms_of(moved, ROOMS, line.topics.topic_partitions)
    scenario.fault(
        f"SIGSTOP w1 owning partitions {sorted(moved)}, inside a transaction ({tries} tries)", len(touched), touched
    )
    try:
        wait_until(
            lambda: not owned_partitions(line.postgres_dsn, line.topics.topic_messages, "w1"),
            60,
            "w1's partitions moved",
            every=0.5,
        )
    finally:
        frozen.thaw()
    scenario.fault("SIGCONT w1 after its partitions moved", 0)
    scenario.wait_drained(total, 180)
    judge(scenario)
    log = frozen.log_file.read_text()
    assert '"partition_fenced"' in log or '"partitions_lost"' in log, "the thawed worker kept its partitions"


def test_a_rolling_sigterm_restart_of_three_workers_loses_and_duplicates_nothing(chaos_pipeline: Pipeline) -> None:
    line = chaos_pipeline
    names = ["w1", "w2", "w3"]
    for name in names:
        line.add_worker(name)
    total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
    scenario = Scenario("rolling SIGTERM", line, f"{ROOMS} rooms x {PER_ROOM}, 3 workers")
    for index in range(3):
        progress(scenario, (index + 1) / 5, total)
        old = names[index]
        assert line.workers[old].stop() == 0, f"{old} did not exit cleanly"
        scenario.fault(f"SIGTERM {old}, then start its replacement", 0)  # a clean hand-over re-sends nothing
        replace(line, names, index, 1)
    scenario.wait_drained(total, 180)
    judge(scenario)


def test_a_rebalance_storm_of_a_worker_joining_and_leaving_every_few_seconds_loses_nothing(
    chaos_pipeline: Pipeline,
) -> None:
    line = chaos_pipeline
    for name in ("w1", "w2"):
        line.add_worker(name)
    per_room = PER_ROOM * 10  # long enough for several join/leave cycles on an idle box too (x5 was 3 on 2026-11-28)
    total = line.produce(rooms=ROOMS, per_room=per_room)
    scenario = Scenario(
        "rebalance storm (a worker joins / leaves every 3 s)", line, f"{ROOMS} rooms x {per_room}, 2+1 workers"
    )
    topic, partitions = line.topics.topic_messages, line.topics.topic_partitions
    guest: str | None = None
    generation, joined = 0, 0.0
    next_event = time.monotonic() + 3
    while not scenario.done(total):
        assert time.monotonic() - scenario.started < 240, line.report().summary()
        if time.monotonic() >= next_event:
            if guest is None:
                generation += 1
                guest = f"guest.{generation}"
                line.add_worker(guest)
                scenario.fault(f"{guest} joins", 0)
                joined = time.monotonic()
            else:
                moved = rooms_of(owned_partitions(line.postgres_dsn, topic, guest), ROOMS, partitions)
                if not moved and time.monotonic() - joined < 15:
                    time.sleep(0.5)  # it leaves once it owns partitions, so every cycle moves some
                    continue
                # A hand-over may re-send only what a revoke grace cut off (a send still waiting for its answer, or
                # for its ack, when the grace ran out: it has no outcome recorded, so the next owner sends it again):
                # at most the one message each moved room had in flight, once for the join (its old owner revoked)
                # and once for the leave (the guest revoked). On a quiet box that is 0 (docs/reliability.md,
                # problem 10); the receipt log judges it per room.
                join = scenario.faults[-1]
                join.what += f", taking {len(moved)} rooms"
                join.bound, join.rooms = len(moved), frozenset(moved)
                assert line.workers[guest].stop() == 0, f"{guest} did not exit cleanly"
                scenario.fault(f"{guest} leaves (SIGTERM), handing over {len(moved)} rooms", len(moved), moved)
                guest = None
            next_event = time.monotonic() + 3
        time.sleep(0.5)  # pacing the storm and polling for the end
    scenario.wait_drained(total, 60)
    # For the reader of the chaos: line only (the bound comes from the faults, the verdict from the receipt log).
    print(f"chaos:   the workers logged {cut_off(line)} rooms cut off by a revoke grace over the run")
    report = scenario.verdict()
    assert len(scenario.faults) >= 5, "the run ended before the storm got going"
    assert_target(scenario, report)


def cut_off(line: Pipeline) -> int:
    """Rooms whose message was still in flight when a revoke grace ran out, over every worker's log so far (the
    ``cut_off`` of each ``partitions_drained``)."""
    total = 0
    for worker in line.workers.values():
        for text in worker.log_file.read_text(errors="replace").splitlines():
            if '"partitions_drained"' in text:
                total += int(json.loads(text).get("cut_off", 0))
    return total
