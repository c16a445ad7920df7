"""The fault matrix's shared parts: the pipeline under test, faults with their duplicate bound, the verdict.

Every scenario runs the real services as OS processes (``inturn_devtools.pipeline``), injects its
faults while the run is in progress, waits until the platform simulator received every produced
message and the group committed every offset, then judges the simulator's receipt log with
``inturn_devtools.receipts.check`` and prints one ``chaos:`` line (the figures of docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest
from confluent_kafka import KafkaException

from inturn import topics
from inturn.db import operator
from inturn.db.pool import application_name
from inturn.kafka import make_admin, partition_for
from inturn.settings import KafkaSettings
from inturn_devtools import LocalKafka, chaos_table
from inturn_devtools.pipeline import Pipeline
from inturn_devtools.receipts import Report
from inturn_devtools.waiting import wait_until
from tests.durability.conftest import PIPELINE_SIM, PIPELINE_WORKER
from tests.worker.harness import committed

#: The platform and worker timings of the durability tests: 40 ms median latency, 10% of callbacks
#: lost, 1.5 s ack timeout, 6 s session timeout, so partitions move within seconds of a fault.
CHAOS_SIM = dict(PIPELINE_SIM)
CHAOS_WORKER = dict(PIPELINE_WORKER)
#: The matrix's workers with a send timeout of 30 s, not 10, for the platform, clock, partition and store rows: on
#: this 2-core box at load 30-40 the simulator answered some sends of a run's first burst (1000 rooms at once) after
#: more than 10 s, having accepted them; the worker's retry then reached the device a second time (a send the
#: platform accepted after the sender gave up on it). Those rows test their fault, not the box's load.
PLATFORM_WORKER = {**CHAOS_WORKER, "INTURN_WORKER_SEND_TIMEOUT_MS": "30000"}


def rooms_of(partitions: set[int], rooms: int, partition_count: int, prefix: str = "room") -> set[str]:
    """The rooms (``<prefix>-<n>``, n < ``rooms``) whose partition is in ``partitions``."""
    return {f"{prefix}-{r}" for r in range(rooms) if partition_for(f"{prefix}-{r}", partition_count) in partitions}


def owned_partitions(dsn: str, topic: str, owner: str) -> set[int]:
    """Partitions whose current epoch belongs to worker ``owner`` (blocking; call from sync code)."""

    async def query() -> set[int]:
        conn = await asyncpg.connect(dsn)
        try:
            return await operator.owned_partitions(conn, topic, owner)
        finally:
            await conn.close()

    return asyncio.run(query())


def freeze_inside_a_transaction(line: Pipeline, name: str, tries: int = 2000) -> int:
    """SIGSTOP worker ``name`` at a moment one of its PostgreSQL sessions is idle inside a transaction (a checkpoint
    round or a claim, holding the epochs' row locks), found by its ``application_name`` in ``pg_stat_activity``;
    returns the tries it took. Each miss thaws the worker at once (a pause of milliseconds) and tries again."""
    worker = line.workers[name]

    async def freeze() -> int:
        conn = await asyncpg.connect(line.postgres_dsn)
        try:
            for attempt in range(1, tries + 1):
                worker.freeze()
                inside = await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE application_name = $1 AND state = 'idle in transaction'",
                    application_name(name),
                )
                if inside:
                    return attempt
                worker.thaw()
                await asyncio.sleep(0.005 * (attempt % 7))  # land at different points of the worker's cycle
        finally:
            await conn.close()
        raise AssertionError(f"{name} was never caught inside a transaction in {tries} tries")

    return asyncio.run(freeze())


@dataclass
class Fault:
    """One injected fault: when (seconds into the run), what, and the rooms it may cost a re-send.

    A fault may re-send at most the one message a room had in flight: 1 duplicate in each room it touches.
    """

    at_s: float
    what: str
    bound: int  # duplicates this fault may cause in total: 1 per room of the affected partitions (0: none allowed)
    rooms: frozenset[str] | None = None  # the rooms it may touch; None: any room (when bound > 0)

    def touches(self, room: str) -> bool:
        """Whether this fault may cost ``room`` a re-send."""
        return self.bound > 0 and (self.rooms is None or room in self.rooms)


@dataclass
class Scenario:
    """One row of the matrix: the run's clock, its faults, and its verdict."""

    name: str
    line: Pipeline
    scale: str
    started: float = field(default_factory=time.monotonic)
    faults: list[Fault] = field(default_factory=list)
    drained_at: float | None = None

    def fault(self, what: str, bound: int, rooms: set[str] | None = None) -> None:
        """Record a fault injected just now, with the duplicates it may cause and the rooms it may touch."""
        self.faults.append(
            Fault(time.monotonic() - self.started, what, bound, frozenset(rooms) if rooms is not None else None)
        )

    @property
    def bound(self) -> int:
        """The duplicates the run may show: the sum of its faults' bounds."""
        return sum(f.bound for f in self.faults)

    def room_bound(self, room: str) -> int:
        """The duplicates ``room`` may show: 1 for each fault that touched it."""
        return sum(1 for f in self.faults if f.touches(room))

    def over_bound(self, report: Report) -> list[str]:
        """Rooms with more duplicates than the faults that touched them allow (each as ``room: got > bound``)."""
        return [
            f"{room.room_id}: {room.duplicated} > {self.room_bound(room.room_id)}"
            for room in report.rooms.values()
            if room.duplicated > self.room_bound(room.room_id)
        ]

    def delivered(self) -> int:
        """Distinct messages at the device so far (the simulator's counters: cheap to poll)."""
        stats = self.line.stats()
        return int(stats["deliveries"]) - int(stats["duplicates"])

    def done(self, total: int) -> bool:
        """Every produced message reached the device and the group committed every offset."""
        try:
            return self.delivered() >= total and committed(self.line.topics, self.line.group) >= total
        except (urllib.error.URLError, OSError):
            return False  # the simulator is busy; ask again

    def wait_drained(self, total: int, within: float) -> None:
        """Wait until ``done``; the drain time runs from the last fault (or the start) to then."""
        wait_until(
            lambda: self.done(total),
            within,
            lambda: f"{self.name} drained: {self.line.report().summary()}",
            every=1.0,
        )
        self.drained_at = time.monotonic()

    @property
    def drain_s(self) -> float:
        """Seconds from the last fault to the last message done."""
        assert self.drained_at is not None, "wait_drained first"
        last = self.faults[-1].at_s if self.faults else 0.0
        return self.drained_at - self.started - last

    def verdict(self) -> Report:
        """Judge the receipt log and print the scenario's ``chaos:`` line."""
        report = self.line.report()
        assert self.drained_at is not None, "wait_drained first"
        worst = report.worst_room
        worst_text = f"{worst.room_id} {worst.duplicated} (bound {self.room_bound(worst.room_id)})" if worst else "-"
        print(
            f"chaos: {self.name} | scale {self.scale} | produced {report.produced} | lost {report.lost} | "
            f"reordered {report.reordered} | duplicates {report.duplicated} | worst room {worst_text} | "
            f"bound {self.bound} | unexpected {report.unexpected} | faults {len(self.faults)} | "
            f"run {self.drained_at - self.started:.1f} s | drain {self.drain_s:.1f} s"
        )
        for fault in self.faults:
            print(f"chaos:   {fault.at_s:6.1f} s  {fault.what} (bound {fault.bound})")
        chaos_table.record(
            {
                "scenario": self.name,
                "scale": self.scale,
                "faults": len(self.faults),
                "produced": report.produced,
                "lost": report.lost,
                "reordered": report.reordered,
                "duplicated": report.duplicated,
                "worst_room": worst.room_id if worst else None,
                "worst_count": worst.duplicated if worst else 0,
                "worst_bound": self.room_bound(worst.room_id) if worst else 0,
                "bound": self.bound,
                "unexpected": report.unexpected,
                "run_s": round(self.drained_at - self.started, 1),
                "drain_s": round(self.drain_s, 1),
                "test": os.environ.get("PYTEST_CURRENT_TEST", "").removesuffix(" (call)"),
            }
        )
        return report


def assert_target(scenario: Scenario, report: Report) -> None:
    """The matrix's targets: 0 lost, 0 reordered (stale re-sends included), nothing unexpected, and in every
    room at most 1 duplicate per fault that touched it (so the total stays within the faults' bound too)."""
    assert (report.lost, report.reordered, report.unexpected) == (0, 0, 0), report.summary()
    assert scenario.over_bound(report) == [], f"{scenario.over_bound(report)[:10]}\n{report.summary()}"
    assert report.duplicated <= scenario.bound, report.summary()


def judge(scenario: Scenario) -> Report:
    """The verdict (its ``chaos:`` line names the worst room) and the matrix's targets."""
    report = scenario.verdict()
    assert_target(scenario, report)
    return report


def worker_counter(line: Pipeline, metric: str) -> float:
    """``metric`` summed over its labels and over every running worker (scraped from their /metrics)."""
    total = 0.0
    for worker in line.workers.values():
        assert worker.health_url, worker.name
        url = worker.health_url.rsplit("/", 1)[0] + "/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - loopback
            for row in answer.read().decode().splitlines():
                if row.startswith((metric + " ", metric + "{")):
                    total += float(row.rsplit(" ", 1)[1])
    return total


def topics_on(broker: LocalKafka, settings: KafkaSettings) -> KafkaSettings:
    """``settings`` pointed at ``broker``, with the four topics created and serving."""
    settings = settings.model_copy(update={"kafka_bootstrap": broker.bootstrap})
    admin = make_admin(settings)
    # A fresh broker on a loaded box may not answer the first look within its 10 s: create is idempotent, ask again.
    wait_until(
        lambda: topics.create(admin, settings, timeout=120) is not None,
        180,
        "the four topics created",
        every=1.0,
        ignore=(TimeoutError, KafkaException),
    )
    return settings


@pytest.fixture
def chaos_pipeline(inturn_topics: KafkaSettings, postgres_dsn: str, tmp_path: Path, test_id: str) -> Iterator[Pipeline]:
    """Simulator and webhook running on this test's topics; each scenario adds its workers."""
    line = Pipeline(inturn_topics, postgres_dsn, tmp_path, group=f"g{test_id}", sim=CHAOS_SIM, worker=CHAOS_WORKER)
    line.start_sim()
    line.start_webhook()
    try:
        yield line
    finally:
        line.stop()


def progress(scenario: Scenario, share: float, total: int, within: float = 120) -> None:
    """Wait until ``share`` of ``total`` reached the device."""

    def reached() -> bool:
        try:
            return scenario.delivered() >= total * share
        except (urllib.error.URLError, OSError):
            return False  # the simulator is busy (a loaded box); ask again

    wait_until(
        reached,
        within,
        f"{scenario.name}: {share:.0%} of {total} delivered",
        every=0.3,
        ignore=(urllib.error.URLError, OSError),  # the simulator is busy (a loaded box): ask again
    )
