"""The fault matrix, store row: PostgreSQL goes back in time while the pipeline runs.

The workers' database (partition epochs, room cursors, dead letters, blocked rooms) is copied with ``pg_dump``
while one worker owns every partition; a second worker joins (every partition is claimed again: epochs grow, cursors
move on), and about 30 s after the copy it is restored in one transaction (``psql --single-transaction``: the
tables emptied and the copy loaded), as a restore from a backup or a promoted replica that is behind would leave it.
The workers must notice (``store_went_back`` in their logs, ``inturn_worker_store_went_back_total``), and the receipt
log must show that no room was sent by two workers at once (each worker sends under ``/_via/<worker>``) and that the
re-sends the lost cursors cause stay within 1 per room.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inturn.settings import KafkaSettings
from inturn_devtools import LocalPostgres
from inturn_devtools.pipeline import Pipeline
from inturn_devtools.postgres import pg_bin
from inturn_devtools.waiting import wait_until
from tests.chaos import conftest as chaos

pytestmark = [pytest.mark.chaos, pytest.mark.kafka, pytest.mark.postgres]

ROOMS, PER_ROOM = 300, 120  # ~400 messages/s on this box: the run must outlast the copy's 30 s and a hand-over
COPY_AGE_S = 30.0  # how old the copy is when it is put back: the scenario itself, not a wait for a condition
TABLES = ("partition_epochs", "room_cursors", "dead_letters", "blocked_rooms")


@pytest.fixture
def own_postgres() -> Iterator[LocalPostgres]:
    """A PostgreSQL server of this test's own, to copy and restore."""
    with LocalPostgres() as server:
        yield server


def copy_of(server: LocalPostgres, path: Path) -> None:
    """The workers' tables, data only, as SQL (``pg_dump``)."""
    tables = [arg for table in TABLES for arg in ("--table", table)]
    subprocess.run(
        [pg_bin("pg_dump"), "--data-only", *tables, "--file", str(path), server.dsn],
        check=True,
        capture_output=True,
    )


def restore(server: LocalPostgres, path: Path) -> None:
    """Put ``path`` back in one transaction: the workers see the tables either as they were or as the copy was."""
    subprocess.run(
        [
            pg_bin("psql"),
            "--no-psqlrc",
            "--quiet",
            "--set=ON_ERROR_STOP=1",
            "--single-transaction",
            "--command",
            f"TRUNCATE {', '.join(TABLES)}",
            "--file",
            str(path),
            server.dsn,
        ],
        check=True,
        capture_output=True,
    )


def epochs(server: LocalPostgres) -> dict[int, tuple[int, str]]:
    """Every partition's epoch and owner as stored now."""
    out = subprocess.run(
        [
            pg_bin("psql"),
            "--no-psqlrc",
            "--tuples-only",
            "--no-align",
            "--field-separator=,",
            "--command",
            "SELECT partition, epoch, owner FROM partition_epochs ORDER BY partition",
            server.dsn,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = [line.split(",") for line in out.splitlines() if line.strip()]
    return {int(p): (int(e), o) for p, e, o in rows}


def claimed_by(server: LocalPostgres, topic: str, worker: str) -> set[int]:
    """The partitions ``worker`` claimed, once it claimed some (its first checkpoint round after the assignment)."""
    owned: set[int] = set()

    def claimed() -> bool:
        owned.update(chaos.owned_partitions(server.dsn, topic, worker))
        return bool(owned)

    wait_until(claimed, 60, f"{worker} claimed its partitions", every=0.5)
    return owned


def logged(line: Pipeline, event: str) -> list[dict[str, Any]]:
    """The JSON log events named ``event`` of every worker, each with the worker's name."""
    found = []
    for name, worker in line.workers.items():
        for text in worker.log_file.read_text(errors="replace").splitlines():
            if f'"{event}"' not in text:
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError:
                continue
            if record.get("event") == event:
                found.append({**record, "worker": name})
    return found


def senders_interleaved(receipts: list[dict[str, Any]]) -> list[str]:
    """Rooms sent by two workers at once: in acceptance order, a room's sender changes back to a worker that had
    already handed it over (w1, w2, w1). One hand-over (w1 then w2) is a change of owner, not two owners."""
    by_room: dict[str, list[tuple[int, str]]] = {}
    for r in receipts:
        by_room.setdefault(r["room_id"], []).append((r["accepted_at_ms"], r.get("via") or "?"))
    interleaved = []
    for room, sends in by_room.items():
        runs: list[str] = []
        for _, via in sorted(sends):
            if not runs or runs[-1] != via:
                runs.append(via)
        if len(runs) != len(set(runs)):
            interleaved.append(f"{room}: {' -> '.join(runs)}")
    return interleaved


@pytest.mark.timeout(600)
def test_postgres_restored_from_a_copy_30_s_old_mid_run_never_has_two_owners_send_a_room(
    inturn_topics: KafkaSettings, own_postgres: LocalPostgres, tmp_path: Path, test_id: str
) -> None:
    line = Pipeline(
        inturn_topics,
        own_postgres.dsn,
        tmp_path,
        group=f"g{test_id}",
        sim=chaos.CHAOS_SIM,
        worker=chaos.PLATFORM_WORKER,
    )
    copy = tmp_path / "copy.sql"
    topic, count = inturn_topics.topic_messages, inturn_topics.topic_partitions
    try:
        line.start_sim()
        line.start_webhook()
        line.add_worker("w1", INTURN_WHATSAPP_BASE_URL=f"{line.sim_url}/_via/w1")
        line.wait_balanced()
        total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
        scenario = chaos.Scenario(
            "PostgreSQL restored from a copy taken 30 s earlier (a hand-over in between)",
            line,
            f"{ROOMS} rooms x {PER_ROOM}, 1, then 2, then 3 workers",
        )
        chaos.progress(scenario, 0.1, total)
        copy_of(own_postgres, copy)
        copied_at = time.monotonic()
        copied = epochs(own_postgres)
        line.add_worker("w2", INTURN_WHATSAPP_BASE_URL=f"{line.sim_url}/_via/w2")
        line.wait_balanced()
        moved = claimed_by(own_postgres, topic, "w2")
        wait_until(
            lambda: all(epochs(own_postgres)[p][0] > copied[p][0] for p in moved),
            60,
            "w2's partitions claimed under epochs newer than the copy's",
            every=0.5,
        )
        scenario.fault(
            f"w2 joins: partitions {sorted(moved)} handed over",
            len(chaos.rooms_of(moved, ROOMS, count)),
            chaos.rooms_of(moved, ROOMS, count),
        )
        before = epochs(own_postgres)
        left = COPY_AGE_S - (time.monotonic() - copied_at)
        assert left > 0, "the hand-over took longer than the copy's age: the row would not restore mid-run"
        assert scenario.delivered() < total, "the run was over before the restore"
        time.sleep(left)
        restore(own_postgres, copy)
        scenario.fault(
            f"restore of the copy taken {time.monotonic() - copied_at:.0f} s earlier: epochs {before} "
            f"put back to {copied}",
            ROOMS,  # any room's cursor may have gone back: 1 re-send per room at most
        )
        wait_until(
            lambda: len(logged(line, "store_went_back")) > 0,
            60,
            "a worker said its store went back",
            every=0.5,
        )
        # A third worker joins: the partitions it takes are claimed on the restored epochs, and their rooms are
        # loaded from the restored cursors.
        line.add_worker("w3", INTURN_WHATSAPP_BASE_URL=f"{line.sim_url}/_via/w3")
        line.wait_balanced()
        taken = claimed_by(own_postgres, topic, "w3")
        scenario.fault(
            f"w3 joins after the restore: partitions {sorted(taken)} handed over",
            len(chaos.rooms_of(taken, ROOMS, count)),
            chaos.rooms_of(taken, ROOMS, count),
        )
        assert scenario.delivered() < total, "the run was over before w3 joined"
        scenario.wait_drained(total, 300)
        report = chaos.judge(scenario)
        went_back = logged(line, "store_went_back")
        counted = chaos.worker_counter(line, "inturn_worker_store_went_back_total")
        fenced = logged(line, "partition_fenced")
        where = sorted({f"{e['worker']}:p{e['partition']}:{e['action']}" for e in went_back})
        print(
            f"chaos:   store_went_back events {len(went_back)} ({', '.join(where)}), counted {counted:.0f}; "
            f"partition_fenced {len(fenced)}; epochs after the run {epochs(own_postgres)}"
        )
        print(f"chaos:   re-sent after the restore: {report.duplicated} in {len(report.rooms)} rooms")
        interleaved = senders_interleaved(line.receipts())
        assert interleaved == [], f"rooms sent by two workers at once: {interleaved[:10]}"
        assert counted == len(went_back) > 0
        assert {e["action"] for e in went_back} <= {"epoch_raised", "fenced"}
        assert all(e["epoch_found"] < e["epoch_held"] or e["action"] == "fenced" for e in went_back)
    finally:
        line.stop()
