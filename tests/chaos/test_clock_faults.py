"""The fault matrix, clock rows: the webhook's clock two minutes ahead of or behind the workers'.

The webhook runs under libfaketime (``LD_PRELOAD``, ``FAKETIME=±120s``; its monotonic clock is left alone), so every
time it reads (and librdkafka stamps on the ack records it produces) is off by the offset. A new owner of a partition
finds the acks published before its assignment by ``offsets_for_times`` on its own clock: with the webhook's record
timestamps two minutes behind, that look-up once skipped every ack published before the assignment, and the new
owner sent those messages again although their acks were in Kafka. The row freezes a worker past the session
timeout so that its in-flight messages are acked while it is frozen, and counts those re-sends.
"""

from __future__ import annotations

import glob
import json
from datetime import datetime
from pathlib import Path

import pytest

from inturn.settings import KafkaSettings
from inturn_devtools.pipeline import Pipeline
from inturn_devtools.waiting import wait_until
from tests.chaos.conftest import CHAOS_SIM, CHAOS_WORKER, Scenario, assert_target, owned_partitions, progress, rooms_of

pytestmark = [pytest.mark.chaos, pytest.mark.kafka, pytest.mark.postgres]

ROOMS, PER_ROOM = 300, 15  # 1000 rooms overloaded the simulator on this shared box (test_platform_faults.py)
FAKETIME = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
#: Every callback called back (no drops), so every message delivered before an assignment was acked before it.
SIM = {**CHAOS_SIM, "INTURN_SIM_DROP_RATE": "0"}
WORKER = {**CHAOS_WORKER, "INTURN_WORKER_SEND_TIMEOUT_MS": "30000"}  # as the platform rows (loaded box)


def skewed(offset_s: int) -> dict[str, str]:
    """The environment that runs a process with its wall clock ``offset_s`` seconds off (libfaketime)."""
    return {
        "LD_PRELOAD": FAKETIME[0],
        "FAKETIME": f"{offset_s:+d}s",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_NO_CACHE": "1",
    }


def assigned_at_ms(log: Path, partitions: set[int]) -> int:
    """When the worker of ``log`` was last assigned a partition of ``partitions`` (its log's timestamp, in ms)."""
    times = []
    for line in log.read_text().splitlines():
        if '"partitions_assigned"' not in line:
            continue
        event = json.loads(line)
        if set(event["partitions"]) & partitions:
            times.append(int(datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp() * 1000))
    assert times, f"no assignment of {sorted(partitions)} in {log}"
    return max(times)


@pytest.mark.skipif(not FAKETIME, reason="libfaketime is not installed (apt-get install faketime)")
@pytest.mark.timeout(600)
@pytest.mark.parametrize("offset_s", [-120, 120], ids=["webhook-2-min-behind", "webhook-2-min-ahead"])
def test_the_webhook_clock_minutes_apart_from_the_workers_resends_no_acked_message(
    offset_s: int, inturn_topics: KafkaSettings, postgres_dsn: str, tmp_path: Path, test_id: str
) -> None:
    line = Pipeline(inturn_topics, postgres_dsn, tmp_path, group=f"g{test_id}", sim=SIM, worker=WORKER)
    topic, count = inturn_topics.topic_messages, inturn_topics.topic_partitions
    try:
        line.start_sim()
        line.start_webhook(**skewed(offset_s))
        for name in ("w1", "w2"):
            line.add_worker(name)
        line.wait_balanced()
        total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
        scenario = Scenario(
            f"webhook clock {offset_s:+d} s from the workers', a worker frozen past the session timeout",
            line,
            f"{ROOMS} rooms x {PER_ROOM}, 2 workers",
        )
        progress(scenario, 0.25, total)
        moved = owned_partitions(postgres_dsn, topic, "w1")
        frozen = line.workers["w1"]
        frozen.freeze()
        rooms = rooms_of(moved, ROOMS, count)
        scenario.fault(f"SIGSTOP w1 owning partitions {sorted(moved)}", len(rooms), rooms)
        try:
            wait_until(lambda: moved <= owned_partitions(postgres_dsn, topic, "w2"), 90, "w1's partitions moved")
        finally:
            frozen.thaw()
        scenario.fault("SIGCONT w1 after its partitions moved", 0)
        scenario.wait_drained(total, 240)
        report = scenario.verdict()
        receipts = line.receipts()
        assigned_ms = assigned_at_ms(line.workers["w2"].log_file, moved)
    finally:
        line.stop()
    webhook_log = (tmp_path / "webhook.log").read_text().splitlines()
    print(f"chaos:   the webhook's first log line (its clock): {webhook_log[0][-60:]}")
    first: dict[tuple[str, str], int] = {}
    resent_after_ack = 0
    for receipt in receipts:
        key = (receipt["room_id"], receipt["message_id"])
        if key not in first:
            first[key] = receipt["delivered_at_ms"]
        elif first[key] < assigned_ms - 1000:
            # Delivered (and so acked: no callback is dropped here) a second before the new owner was assigned.
            resent_after_ack += 1
    print(f"chaos:   messages sent again although acked before the new owner's assignment: {resent_after_ack}")
    assert_target(scenario, report)
    assert resent_after_ack == 0
