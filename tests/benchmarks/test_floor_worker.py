"""The worker benchmark's ordered floors keep each room's order, judged from the simulator's receipt log: with the
room's next send started by a task per room (``--ordered``) or from the callbacks of the answer and the ack
(``--callbacks``). A floor that reordered would be measuring less than ordering costs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bench_worker import NO_POSTGRES, STATUSES_PER_MESSAGE, WEBHOOK_ENV
from inturn.settings import KafkaSettings
from inturn_devtools.pipeline import Pipeline

# Latency that varies from one send to the next: a sender that did not wait for each ack would reorder some rooms.
SIM = {
    "INTURN_SIM_LATENCY_MEDIAN_MS": "5",
    "INTURN_SIM_LATENCY_P99_MS": "40",
    "INTURN_SIM_LATENCY_MAX_MS": "80",
    "INTURN_SIM_DROP_RATE": "0",
}


@pytest.mark.parametrize("flags", [["--ordered"], ["--callbacks"]], ids=["tasks", "callbacks"])
def test_an_ordered_floor_delivers_every_message_in_its_room_s_order(
    flags: list[str], inturn_topics: KafkaSettings, tmp_path: Path
) -> None:
    with Pipeline(inturn_topics, NO_POSTGRES, tmp_path, sim=SIM, webhook=WEBHOOK_ENV) as line:
        line.start()
        total = line.produce(rooms=40, per_room=6, prefix="floor", payload_bytes=64)
        env = {**os.environ, **line.worker_settings_env("floor")}
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.floor_worker", str(total), str(STATUSES_PER_MESSAGE), *flags],
            check=True,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        ).stdout
        result = json.loads(out.splitlines()[-1])
        report = line.report()
    assert result["sent"] == total == 240
    assert (report.lost, report.reordered, report.duplicated) == (0, 0, 0)
