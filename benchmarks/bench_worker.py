"""The worker's cost: CPU per delivered message against a bare aiohttp POST of the same body to the same
simulator, measured in the same run; and the resident memory of one worker holding 25k rooms at once.

Everything is a separate process (simulator, webhook, worker, bare client) so each one's CPU time is
its own, read from /proc (the worker) or getrusage (the bare client).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import fresh_topics
from inturn.devstack import LocalKafka, LocalPostgres
from inturn.devstack.pipeline import ACCESS_TOKEN, PHONE_NUMBER_ID, Pipeline
from inturn.kafka import committed_total


def _scenario(
    kafka: LocalKafka,
    pg: LocalPostgres,
    name: str,
    rooms: int,
    per_room: int,
    sim_env: dict[str, str],
    worker_env: dict[str, str],
    payload_bytes: int,
    within: float,
) -> dict[str, Any]:
    settings = fresh_topics(kafka.bootstrap, name, 4)
    workdir = Path(tempfile.mkdtemp(prefix=f"inturn-bench-{name}-"))
    line = Pipeline(settings, pg.dsn, workdir, group=f"bench-{name}", sim=sim_env, worker=worker_env)
    line.start_sim()
    line.start_webhook()
    worker = line.add_worker("w1")
    try:
        line.wait_balanced()
        cpu0 = worker.cpu_seconds()
        t0 = time.monotonic()
        total = line.produce(rooms=rooms, per_room=per_room, prefix=name, payload_bytes=payload_bytes)
        peak_rooms = 0.0
        deadline = time.monotonic() + within
        while committed_total(settings, line.group) < total:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: not done after {within}s")
            peak_rooms = max(peak_rooms, line.worker_gauge("w1", "inturn_worker_active_rooms", timeout=15) or 0.0)
            time.sleep(0.5)
        wall = time.monotonic() - t0
        cpu = worker.cpu_seconds() - cpu0
        rss, peak_rss = worker.rss_mb()
        report = line.report()
        return {
            "messages": total,
            "rooms": rooms,
            "wall_s": round(wall, 2),
            "msgs_per_s": round(total / wall, 1),
            "worker_cpu_s": round(cpu, 3),
            "worker_cpu_us_per_message": round(cpu / total * 1e6, 1),
            "worker_rss_mb": round(rss, 1),
            "worker_peak_rss_mb": round(peak_rss, 1),
            "peak_active_rooms": peak_rooms,
            "lost": report.lost,
            "reordered": report.reordered,
            "duplicated": report.duplicated,
        }
    finally:
        line.stop()


def _bare(
    kafka: LocalKafka, requests: int, concurrency: int, recipients: int, payload_bytes: int, sim_env: dict[str, str]
) -> dict[str, Any]:
    settings = fresh_topics(kafka.bootstrap, "bare", 4)
    workdir = Path(tempfile.mkdtemp(prefix="inturn-bench-bare-"))
    line = Pipeline(settings, "postgresql://unused@127.0.0.1:1/unused", workdir, sim=sim_env)
    line.start_sim()
    line.start_webhook()
    try:
        url = f"{line.sim_url}/v21.0/{PHONE_NUMBER_ID}/messages"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.bare_post",
                url,
                ACCESS_TOKEN,
                str(requests),
                str(concurrency),
                str(recipients),
                str(payload_bytes),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        result: dict[str, Any] = json.loads(out)
        return result
    finally:
        line.stop()


def _mean_of(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The two baseline runs as one: CPU per request over both, and each run's own figure."""
    requests = before["requests"] + after["requests"]
    cpu_s = before["cpu_s"] + after["cpu_s"]
    return {
        "requests": requests,
        "failures": before["failures"] + after["failures"],
        "cpu_s": cpu_s,
        "wall_s": before["wall_s"] + after["wall_s"],
        "cpu_us_per_request": cpu_s / requests * 1e6,
        "cpu_us_per_request_before_and_after": [before["cpu_us_per_request"], after["cpu_us_per_request"]],
    }


def _rooms_in_flight(
    kafka: LocalKafka, pg: LocalPostgres, rooms: int, sim_env: dict[str, str], worker_env: dict[str, str]
) -> dict[str, Any]:
    """Every room with a message sent and waiting for its ack, and its next message buffered, at once: the
    simulator withholds every status until each room's first message reached it; RSS is read then. Then
    the statuses are released and everything drains (the drain's peak RSS is reported too)."""
    name = "rss"
    settings = fresh_topics(kafka.bootstrap, name, 4)
    workdir = Path(tempfile.mkdtemp(prefix=f"inturn-bench-{name}-"))
    env = {
        **worker_env,
        "INTURN_WORKER_ACK_TIMEOUT_MS": "600000",  # nothing may time out while the statuses are held
        "INTURN_WORKER_HIGH_WATERMARK": "100000",
        "INTURN_WORKER_LOW_WATERMARK": "50000",
        "INTURN_WORKER_POOL_SIZE": "500",
    }
    line = Pipeline(settings, pg.dsn, workdir, group=f"bench-{name}", sim=sim_env, worker=env)
    line.start_sim()
    line.start_webhook()
    worker = line.add_worker("w1")
    try:
        line.configure_sim({"withhold_recipients": [f"49170{r:07d}" for r in range(rooms)]})
        idle_rss, _ = worker.rss_mb()
        t0 = time.monotonic()
        total = line.produce(rooms=rooms, per_room=2, prefix=name, payload_bytes=1024)
        while line.stats()["accepted"] < rooms:
            if time.monotonic() - t0 > 600:
                raise TimeoutError(f"{name}: not every room had sent its first message after 600 s")
            time.sleep(0.5)
        rss, _ = worker.rss_mb()
        filled = time.monotonic() - t0
        line.configure_sim({"withhold_recipients": []})
        deadline = time.monotonic() + 600
        while committed_total(settings, line.group) < total:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: not drained after 600 s")
            time.sleep(0.5)
        _, peak = worker.rss_mb()
        report = line.report()
        return {
            "rooms": rooms,
            "messages": total,
            "worker_idle_rss_mb": round(idle_rss, 1),
            "worker_rss_mb": round(rss, 1),  # every room in flight at once
            "worker_kb_per_room": round((rss - idle_rss) * 1024 / rooms, 2),
            "worker_peak_rss_mb_incl_drain": round(peak, 1),
            "seconds_to_fill": round(filled, 1),
            "lost": report.lost,
            "reordered": report.reordered,
            "duplicated": report.duplicated,
        }
    finally:
        line.stop()


def run(quick: bool) -> dict[str, Any]:
    """CPU per message (worker vs bare POST, same run) and RSS with 25k rooms in flight."""
    rooms, per_room = (500, 10) if quick else (2000, 10)
    sim_env = {
        "INTURN_SIM_LATENCY_MEDIAN_MS": "20",
        "INTURN_SIM_LATENCY_P99_MS": "60",
        "INTURN_SIM_LATENCY_MAX_MS": "200",
        "INTURN_SIM_DROP_RATE": "0",
    }
    worker_env = {"INTURN_WORKER_ACK_TIMEOUT_MS": "5000", "INTURN_LOG_LEVEL": "WARNING"}
    with LocalKafka(heap_mb=768) as kafka, LocalPostgres() as pg:
        # The baseline is measured before and after the worker: on a shared or virtual machine one measurement of it
        # moves by a quarter between runs, and the ratio is only as steady as its denominator.
        before = _bare(kafka, rooms * per_room, min(rooms, 200), rooms, 1024, sim_env)
        cpu = _scenario(kafka, pg, "cpu", rooms, per_room, sim_env, worker_env, 1024, within=600)
        after = _bare(kafka, rooms * per_room, min(rooms, 200), rooms, 1024, sim_env)
        memory = _rooms_in_flight(kafka, pg, 5000 if quick else 25_000, sim_env, worker_env)
    bare = _mean_of(before, after)
    return {
        "bare_post": bare,
        "worker": cpu,
        "cpu_ratio_worker_vs_bare_post": round(cpu["worker_cpu_us_per_message"] / bare["cpu_us_per_request"], 3),
        "target_ratio": 1.3,
        "rooms_in_flight": memory,
        "target_rss_mb": 300,
    }
