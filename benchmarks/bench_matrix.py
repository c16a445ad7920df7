"""The scenario matrix: key-level ('ack') against partition-level ('partition') ordering against the raw HTTP
loop of the same box, per room count and ack rate, with 1 KB messages and a lognormal platform latency.

Per scenario (rooms x ack rate), each on fresh topics of the same partition count, in one Kafka and one
PostgreSQL for the whole matrix:

1. raw: the simulator and the webhook driven by ``benchmarks.bare_post`` (no Kafka on the send side, no
   ordering, concurrency = rooms capped at the worker's HTTP pool size); rate = sends the simulator
   accepted / the client's wall time.
2. one backlog (1 KB messages, rooms interleaved) produced to two messages topics, one per mode;
3. per mode: simulator + webhook + one worker; after the first send is accepted and a warm-up, count the
   receipt log's sends accepted in a fixed window, then stop without waiting for the backlog to drain
   ('partition' mode at 100 ms latency would take hours). The worker's CPU over the window gives CPU per
   delivered message; the events topic and the receipt log give the added latencies
   (``benchmarks.matrix_figures``); the receipt checker gives lost/reordered/duplicated.

The simulator's drop rate is the share of lost acks (ack rate 0.85 = drop rate 0.15); an ack that never
comes costs the room the ack timeout.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from benchmarks import code_version, fresh_topics, producing
from benchmarks import matrix_figures as figures
from inturn.schemas import now_ms
from inturn.settings import KafkaSettings
from inturn_devtools import KAFKA_VERSION, LocalKafka, LocalPostgres
from inturn_devtools.pipeline import ACCESS_TOKEN, PHONE_NUMBER_ID, Pipeline, message_value
from inturn_devtools.reading import reading
from inturn_devtools.receipts import check
from inturn_devtools.waiting import wait_until

PARTITIONS = 12  # the project's default topic_partitions; both modes use the same count
PAYLOAD_BYTES = 1024
ACK_RATES = (1.0, 0.85)
LATENCY_MS = {"median": 100, "p99": 400, "max": 2000}
ACK_TIMEOUT_MS = 1500
WARMUP_ROOMS_PER_S = 5000  # one more second of warm-up per this many rooms
RAW_CONCURRENCY_CAP = 200  # the worker's default HTTP pool size (INTURN_WORKER_POOL_SIZE)
#: How much more than the raw loop could send during the warm-up and the window each scenario's backlog holds: ack
#: mode reached 0.99 of the raw rate on a quiet box, and on a loaded one the raw loop's few seconds can catch a
#: busier moment than the worker's window (ack mode sent 1.48 times the raw rate at 1,000 rooms, load 3-7, and
#: nearly ran out with a margin of 1.5).
BACKLOG_MARGIN = 2.0


@dataclass(frozen=True)
class Plan:
    """How big and how long: the full matrix or the quick one."""

    rooms: tuple[int, ...]
    backlog: int  # messages produced per scenario at least (2 per room, and ``backlog_per_room``'s, at least)
    raw_requests: int
    warmup_s: float
    window_s: float


#: The raw loop's 60,000 requests take about as long as the window (15,000 were a burst of 3 to 8 s, whose rate
#: moved with the box's load more than the window's did).
FULL = Plan(rooms=(100, 1000, 5000, 25_000), backlog=50_000, raw_requests=60_000, warmup_s=5, window_s=25)
QUICK = Plan(rooms=(100, 1000), backlog=15_000, raw_requests=5_000, warmup_s=3, window_s=10)


def run(quick: bool, plan: Plan | None = None, ack_rates: tuple[float, ...] = ACK_RATES) -> dict[str, Any]:
    """Every scenario of the plan; a scenario that fails is recorded with its error and the others go on."""
    plan = plan or (QUICK if quick else FULL)
    started = time.time()
    machine = _machine()
    code = code_version()
    scenarios: list[dict[str, Any]] = []
    with LocalKafka(heap_mb=768) as kafka, LocalPostgres() as pg:
        for rooms in plan.rooms:
            for ack_rate in ack_rates:
                name = f"r{rooms}a{round(ack_rate * 100)}"
                print(f"-- scenario {name}: {rooms} rooms, ack rate {ack_rate}", flush=True)
                try:
                    scenarios.append(_scenario(kafka, pg, plan, name, rooms, ack_rate))
                except Exception as exc:  # noqa: BLE001 - one failed scenario must not hide the others' figures
                    print(f"scenario {name} failed: {exc!r}", file=sys.stderr, flush=True)
                    scenarios.append({"name": name, "rooms": rooms, "ack_rate": ack_rate, "error": repr(exc)})
    machine["load_average_at_end"] = [round(v, 2) for v in os.getloadavg()]
    return {
        "machine": machine,
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(started)),
        "duration_s": round(time.time() - started, 1),
        "quick": quick,
        "code": code,
        "setup": {
            "partitions": PARTITIONS,
            "payload_bytes": PAYLOAD_BYTES,
            "latency_ms": LATENCY_MS,
            "ack_rates": list(ack_rates),
            "ack_timeout_ms": ACK_TIMEOUT_MS,
            "raw_concurrency_cap": RAW_CONCURRENCY_CAP,
            "backlog_min": plan.backlog,
            "backlog_margin": BACKLOG_MARGIN,
            "raw_requests": plan.raw_requests,
            "warmup_s": plan.warmup_s,
            "warmup_s_per_room": 1 / WARMUP_ROOMS_PER_S,
            "window_s": plan.window_s,
            "workers": 1,
        },
        "scenarios": scenarios,
        "failed_scenarios": sum(1 for s in scenarios if "error" in s),
    }


def _machine() -> dict[str, Any]:
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    total_kb = next((int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:")), 0)
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "unknown")
    return {
        "cpus": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "ram_gb": round(total_kb / 1024 / 1024, 1),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "kafka": KAFKA_VERSION,
        "load_average_at_start": [round(v, 2) for v in os.getloadavg()],
    }


def sim_env_for(ack_rate: float) -> dict[str, str]:
    return {
        "INTURN_SIM_LATENCY_MEDIAN_MS": str(LATENCY_MS["median"]),
        "INTURN_SIM_LATENCY_P99_MS": str(LATENCY_MS["p99"]),
        "INTURN_SIM_LATENCY_MAX_MS": str(LATENCY_MS["max"]),
        "INTURN_SIM_DROP_RATE": f"{1 - ack_rate:.4f}",
        "INTURN_LOG_LEVEL": "WARNING",
    }


def _scenario(
    kafka: LocalKafka, pg: LocalPostgres, plan: Plan, name: str, rooms: int, ack_rate: float
) -> dict[str, Any]:
    sim_env = sim_env_for(ack_rate)
    raw = raw_loop(kafka, f"{name}-raw", rooms, plan.raw_requests, sim_env)
    per_room = backlog_per_room(plan, rooms, raw["msgs_per_s"])
    modes = {mode: fresh_topics(kafka.bootstrap, f"{name}-{mode}", PARTITIONS) for mode in ("ack", "partition")}
    t0 = time.monotonic()
    produced = produce_backlog(list(modes.values()), rooms, per_room, prefix=name)
    produce_s = time.monotonic() - t0
    high = high_watermark_for(rooms)
    measured = {
        mode: measure_mode(pg, settings, plan, f"{name}-{mode}", mode, sim_env, produced, high)
        for mode, settings in modes.items()
    }
    ack, part = measured["ack"], measured["partition"]
    return {
        "name": name,
        "rooms": rooms,
        "ack_rate": ack_rate,
        "backlog": sum(len(ids) for ids in produced.values()),
        "per_room": per_room,
        "produce_s": round(produce_s, 1),
        "worker_high_watermark": high,
        "raw": raw,
        "ack": ack,
        "partition": part,
        "ack_over_partition": _ratio(ack["msgs_per_s"], part["msgs_per_s"]),
        "ack_over_raw": _ratio(ack["msgs_per_s"], raw["msgs_per_s"]),
        "partition_over_raw": _ratio(part["msgs_per_s"], raw["msgs_per_s"]),
        "ack_cpu_over_raw_cpu": _ratio(ack["worker_cpu_us_per_message"], raw["cpu_us_per_request"]),
    }


def backlog_per_room(plan: Plan, rooms: int, raw_msgs_per_s: float) -> int:
    """Messages per room: enough that no room runs out before the window ends, were the worker to send at the raw
    loop's rate (times ``BACKLOG_MARGIN``) from its first send on; at least the plan's backlog, and 2 per room.

    A room sends one message per round trip, so a backlog sized for the room count alone drained early: 50,000
    messages are 2 a room at 25,000 rooms, sent within the warm-up, and the window then counted almost nothing
    (ack / raw 0 at 25,000 rooms and 0.14 at 5,000 in the run of 2026-11-25 21:34 UTC)."""
    busy_s = plan.warmup_s + rooms / WARMUP_ROOMS_PER_S + plan.window_s  # from the first send to the window's end
    needed = math.ceil(raw_msgs_per_s * busy_s * BACKLOG_MARGIN / rooms)
    return max(2, math.ceil(plan.backlog / rooms), needed)


def high_watermark_for(rooms: int) -> int:
    """The worker's high watermark (buffered messages that pause a partition) for ``rooms`` rooms: room for two
    messages of every room of a partition, and never below the worker's default (5,000).

    It is a count per partition: the matrix gave 2 x rooms before, 12 times what holding every room needs, so with a
    backlog that lasts the window the worker buffered most of it (1,049 MiB at 25,000 rooms, 23:18 UTC run)."""
    return max(5000, 2 * math.ceil(rooms / PARTITIONS))


def worker_env_for(mode: str) -> dict[str, str]:
    """The worker's settings in every scenario of ``mode``: the matrix's ack timeout, a revoke grace to match."""
    return {
        "INTURN_WORKER_MODE": mode,
        "INTURN_WORKER_ACK_TIMEOUT_MS": str(ACK_TIMEOUT_MS),
        "INTURN_WORKER_REVOKE_GRACE_MS": str(2 * ACK_TIMEOUT_MS),
        "INTURN_LOG_LEVEL": "WARNING",
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def raw_loop(kafka: LocalKafka, name: str, rooms: int, requests: int, sim_env: dict[str, str]) -> dict[str, Any]:
    """The raw HTTP loop: bare POSTs to the simulator (which calls the webhook back), no ordering."""
    settings = fresh_topics(kafka.bootstrap, name, PARTITIONS)
    workdir = Path(tempfile.mkdtemp(prefix=f"inturn-matrix-{name}-"))
    with Pipeline(settings, "postgresql://unused@127.0.0.1:1/unused", workdir, sim=sim_env) as line:
        line.start()
        concurrency = min(rooms, RAW_CONCURRENCY_CAP)
        url = f"{line.sim_url}/v21.0/{PHONE_NUMBER_ID}/messages"
        command = [sys.executable, "-m", "benchmarks.bare_post", url, ACCESS_TOKEN]
        command += [str(requests), str(concurrency), str(rooms), str(PAYLOAD_BYTES)]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        bare: dict[str, Any] = json.loads(out)
        accepted = int(line.stats()["accepted"])
    shutil.rmtree(workdir, ignore_errors=True)
    return {
        "requests": bare["requests"],
        "failures": bare["failures"],
        "concurrency": concurrency,
        "accepted_by_platform": accepted,
        "wall_s": round(bare["wall_s"], 2),
        "msgs_per_s": round(accepted / bare["wall_s"], 1),
        "cpu_us_per_request": round(bare["cpu_us_per_request"], 1),
    }


def produce_backlog(targets: list[KafkaSettings], rooms: int, per_room: int, *, prefix: str) -> dict[str, list[str]]:
    """The same backlog to every target's messages topic, rooms interleaved; each room's order."""
    filler = "x" * PAYLOAD_BYTES
    produced: dict[str, list[str]] = {f"{prefix}-{r}": [] for r in range(rooms)}
    count = 0
    with producing(targets[0], 120, "the whole backlog") as producer:
        for n in range(per_room):
            for r in range(rooms):
                room, message_id, value = message_value(prefix, r, n, filler)
                for target in targets:
                    while True:
                        try:
                            producer.produce(target.topic_messages, key=room, value=value)
                            break
                        except BufferError:
                            producer.poll(0.1)
                produced[room].append(message_id)
                count += 1
                if count % 5_000 == 0:
                    producer.poll(0)
    return produced


def measure_mode(
    pg: LocalPostgres,
    settings: KafkaSettings,
    plan: Plan,
    name: str,
    mode: str,
    sim_env: dict[str, str],
    produced: dict[str, list[str]],
    high_watermark: int,
) -> dict[str, Any]:
    worker_env = {
        **worker_env_for(mode),
        "INTURN_WORKER_HIGH_WATERMARK": str(high_watermark),
        "INTURN_WORKER_LOW_WATERMARK": str(high_watermark // 2),
    }
    workdir = Path(tempfile.mkdtemp(prefix=f"inturn-matrix-{name}-"))
    with Pipeline(settings, pg.dsn, workdir, group=f"matrix-{name}", sim=sim_env, worker=worker_env) as line:
        line.start()
        worker = line.add_worker("w1")
        wait_until(
            lambda: int(line.stats()["accepted"]) > 0 or not worker.running,
            120,
            f"{name}: a send at the simulator (log: {worker.log_file})",
            every=0.2,
        )
        if not worker.running:
            raise RuntimeError(f"{name}: the worker exited before its first send (log: {worker.log_file})")
        warmup_s = plan.warmup_s + len(produced) / WARMUP_ROOMS_PER_S  # the worker takes every room in first
        peak_rooms = _sample_rooms(line, time.monotonic() + warmup_s, 0.0)
        start_ms, cpu0 = now_ms(), worker.cpu_seconds()
        peak_rooms = _sample_rooms(line, time.monotonic() + plan.window_s, peak_rooms)
        end_ms, cpu1 = now_ms(), worker.cpu_seconds()
        rss, peak_rss = worker.rss_mb()
        if not worker.running:
            raise RuntimeError(f"{name}: the worker exited during the window (log: {worker.log_file})")
        events = read_events(settings)  # before the receipts: every acked message then has its receipt
        receipts = line.receipts()
    delivered = figures.accepted_in(receipts, start_ms, end_ms)
    window_s = (end_ms - start_ms) / 1000
    verdict = figures.verdict(check(receipts, produced), produced, receipts, ACK_TIMEOUT_MS)
    shutil.rmtree(workdir, ignore_errors=True)
    return {
        "mode": mode,
        "warmup_s": round(warmup_s, 1),
        "window_s": round(window_s, 2),
        "delivered_in_window": delivered,
        "msgs_per_s": round(delivered / window_s, 1),
        "worker_cpu_s": round(cpu1 - cpu0, 2),
        "worker_cpu_us_per_message": round((cpu1 - cpu0) / delivered * 1e6, 1) if delivered else None,
        "worker_rss_mb": round(rss, 1),
        "worker_peak_rss_mb": round(peak_rss, 1),
        "peak_active_rooms": peak_rooms,
        "backlog_left_at_end": verdict["not_yet_sent"],
        "latency": figures.latencies(events, receipts, start_ms, end_ms, partition_turns=mode == "partition"),
        "receipts": verdict,
    }


def _sample_rooms(line: Pipeline, until: float, peak: float) -> float:
    """Wait until ``until`` (monotonic), reading the worker's active-rooms gauge every 2 s; the peak seen."""
    while (left := until - time.monotonic()) > 0:
        peak = max(peak, line.worker_gauge("w1", "inturn_worker_active_rooms") or 0.0)
        time.sleep(min(2.0, max(left, 0.0)))
    return peak


def read_events(settings: KafkaSettings) -> list[dict[str, Any]]:
    """Every event on the events topic up to its end right now, decoded."""
    with reading(settings, settings.topic_events) as reader:
        return [orjson.loads(record.value or b"{}") for record in reader.to_end(120)]


def main(argv: list[str] | None = None) -> None:
    """A chosen part of the matrix, for development: ``python -m benchmarks.bench_matrix --rooms 100``."""
    import argparse
    import dataclasses

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_matrix", description=__doc__)
    parser.add_argument("--rooms", type=int, nargs="+", default=list(QUICK.rooms))
    parser.add_argument("--ack-rates", type=float, nargs="+", default=list(ACK_RATES))
    parser.add_argument("--backlog", type=int, default=QUICK.backlog)
    parser.add_argument("--raw-requests", type=int, default=QUICK.raw_requests)
    parser.add_argument("--warmup", type=float, default=QUICK.warmup_s)
    parser.add_argument("--window", type=float, default=QUICK.window_s)
    parser.add_argument("--save", action="store_true", help="also write var/bench/matrix.json (for write_docs)")
    args = parser.parse_args(argv)
    plan = dataclasses.replace(
        QUICK,
        rooms=tuple(args.rooms),
        backlog=args.backlog,
        raw_requests=args.raw_requests,
        warmup_s=args.warmup,
        window_s=args.window,
    )
    result = run(quick=False, plan=plan, ack_rates=tuple(args.ack_rates))  # the plan is explicit: not --quick
    result["command"] = "python -m benchmarks.bench_matrix " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.save:
        Path("var/bench").mkdir(parents=True, exist_ok=True)
        Path("var/bench/matrix.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
