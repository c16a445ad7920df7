"""Fast restarts: a worker with a static group membership (``INTURN_WORKER_INSTANCE_ID``, the pod's name in the
chart's StatefulSet) that is killed and started again takes its partitions back at once, without waiting for
its old session to time out. Judged from the simulator's receipt log (when each send was accepted)."""

from __future__ import annotations

import json
import time
from datetime import datetime

from inturn_devtools.pipeline import Pipeline
from inturn_devtools.waiting import wait_until
from tests.durability.conftest import wait_done, wait_received

#: Far longer than the 3 s the restart may take: a restart that waits for the old session shows plainly.
SESSION_TIMEOUT_MS = "30000"


def test_a_static_member_killed_and_restarted_sends_again_within_3_s_of_its_start(pipeline: Pipeline) -> None:
    static = {"INTURN_WORKER_INSTANCE_ID": "worker-0", "INTURN_WORKER_SESSION_TIMEOUT_MS": SESSION_TIMEOUT_MS}
    pipeline.add_worker("w1", **static)
    total = pipeline.produce(rooms=300, per_room=12)
    wait_received(pipeline, total // 4)
    pipeline.workers["w1"].kill()
    started_ms = time.time() * 1000
    pipeline.add_worker("w1-restarted", **static)

    def sends_since_start() -> list[float]:
        return [r["accepted_at_ms"] for r in pipeline.receipts() if r["accepted_at_ms"] >= started_ms]

    wait_until(sends_since_start, 60, "a send by the restarted worker", every=0.1)
    first_send_ms = min(sends_since_start())
    up_ms = _started_at_ms(pipeline, "w1-restarted")
    print(
        f"restart: first send {(first_send_ms - up_ms) / 1000:.2f} s after the worker started "
        f"({(first_send_ms - started_ms) / 1000:.2f} s after the process was spawned, Python's start-up included); "
        f"session timeout {int(SESSION_TIMEOUT_MS) / 1000:.0f} s"
    )
    assert first_send_ms - up_ms <= 3000
    wait_done(pipeline, total, within=180)
    report = pipeline.report()
    assert (report.lost, report.reordered, report.unexpected) == (0, 0, 0), report.summary()


def _started_at_ms(line: Pipeline, name: str) -> float:
    """When the worker logged ``worker_started`` (its settings loaded, before it joins the group), in epoch ms."""
    for raw in line.workers[name].log_file.read_text().splitlines():
        if raw.startswith("{") and (event := json.loads(raw)).get("event") == "worker_started":
            return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp() * 1000
    raise AssertionError(f"{name} never logged worker_started")
