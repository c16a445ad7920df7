"""Fixtures of the durability tests: the whole pipeline as separate OS processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inturn.settings import KafkaSettings
from inturn_devtools.pipeline import Pipeline
from inturn_devtools.waiting import wait_until
from tests.worker.harness import committed

#: A platform with realistic latency that loses 10% of callbacks; workers with short timeouts.
PIPELINE_SIM = {
    "INTURN_SIM_LATENCY_MEDIAN_MS": "40",
    "INTURN_SIM_LATENCY_P99_MS": "150",
    "INTURN_SIM_LATENCY_MAX_MS": "400",
    "INTURN_SIM_DROP_RATE": "0.1",
}
PIPELINE_WORKER = {
    "INTURN_WORKER_ACK_TIMEOUT_MS": "1500",
    "INTURN_WORKER_SESSION_TIMEOUT_MS": "6000",
    "INTURN_WORKER_REVOKE_GRACE_MS": "3500",
    "INTURN_WORKER_CURSOR_FLUSH_MS": "100",
    "INTURN_WORKER_COMMIT_INTERVAL_MS": "200",
}


@pytest.fixture
def pipeline(inturn_topics: KafkaSettings, postgres_dsn: str, tmp_path: Path, test_id: str) -> Iterator[Pipeline]:
    """Simulator and webhook running; workers are added by each test (sharing one database: cursors and
    epochs are kept per messages topic)."""
    with Pipeline(
        inturn_topics, postgres_dsn, tmp_path, group=f"g{test_id}", sim=PIPELINE_SIM, worker=PIPELINE_WORKER
    ) as line:
        yield line.start()


def wait_done(line: Pipeline, total: int, within: float) -> None:
    """Wait until every produced message reached the device and the group committed every offset."""

    def done() -> bool:
        received = {(r["room_id"], r["message_id"]) for r in line.receipts()}
        return len(received) >= total and committed(line.topics, line.group) >= total

    wait_until(done, within, lambda: f"every message done: {line.report().summary()}", every=0.5)


def wait_received(line: Pipeline, count: int, within: float = 60) -> None:
    """Wait until the platform received ``count`` distinct messages."""
    wait_until(
        lambda: len({(r["room_id"], r["message_id"]) for r in line.receipts()}) >= count,
        within,
        f"{count} distinct messages at the platform",
        every=0.2,
    )
