"""The whole pipeline's cost per delivered message, as the platforms call it: broker, worker and webhook.

One Kafka broker (JMX on loopback) and one PostgreSQL for the run; per variant of the Kafka clients' configuration,
on fresh topics:

1. simulator + webhook + one worker in ack mode; the simulator calls back one status per request (``sent``,
   ``delivered``, ``read``; 12% of the messages lose every callback), as WhatsApp Cloud and Twilio do, not in
   batches (docs/platform-simulator.md, Callbacks);
2. idle: every process's CPU (from /proc) over a few seconds with no traffic, stated beside the figures;
3. messages written to the messages topic at a stated rate (rooms in turn) by a producer with the bridge's producer
   configuration (it stands in for the bridge, whose Pub/Sub emulator would take a core of this box); after a
   warm-up, a window over which each process's CPU and the broker's own counters (JMX: requests by type, records and
   requests per topic) are read at both ends;
4. the producer stops, the worker finishes; the receipt log gives the messages delivered in the window (sends the
   simulator accepted), the worker's events its turn->sent and ack latencies (``matrix_figures.latencies``: the
   worker's own timestamps, finer than its histograms' buckets).

Every variant is compared with ``baseline`` (the configuration before issue 42) measured in the same run, in
alternation when repeated. ``python -m benchmarks.bench_pipeline --help`` runs chosen variants, rates and repeats;
``make bench BENCH_ARGS=pipeline`` runs this benchmark alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import code_version, fresh_topics
from benchmarks import matrix_figures as figures
from benchmarks.bench_half_load import produce_paced
from benchmarks.bench_matrix import PAYLOAD_BYTES, read_events
from inturn.kafka import committed_total
from inturn.schemas import now_ms
from inturn_devtools import KAFKA_VERSION, LocalKafka, LocalPostgres
from inturn_devtools.kafka import BrokerMetrics
from inturn_devtools.pipeline import Pipeline
from inturn_devtools.receipts import check
from inturn_devtools.waiting import wait_until

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

ROOMS = 2000
LOST_SHARE = 0.12
#: The worker's default. At 1,500 ms (the matrix's) nearly every ack came too late on a box at load 20-40, where the
#: webhook's Kafka confirmations alone took 2.5 s on average: the acks topic then carried late acks, not the flow.
ACK_TIMEOUT_MS = 10_000
SIM_ENV = {
    "INTURN_SIM_CALLBACK_BATCH_MAX": "1",  # one status per callback request
    # Callback requests in flight: at 8, one status per request kept the callbacks behind the sends on a loaded box
    # (most acks came after the ack timeout); a platform calls back over many connections.
    "INTURN_SIM_CALLBACK_CONCURRENCY": "64",
    "INTURN_SIM_READ_RATE": "1.0",  # sent, delivered, read
    "INTURN_SIM_DROP_RATE": f"{LOST_SHARE}",
    "INTURN_SIM_LATENCY_MEDIAN_MS": "100",
    "INTURN_SIM_LATENCY_P99_MS": "400",
    "INTURN_SIM_LATENCY_MAX_MS": "2000",
    "INTURN_LOG_LEVEL": "WARNING",
}
WORKER_ENV = {
    "INTURN_WORKER_MODE": "ack",
    "INTURN_WORKER_ACK_TIMEOUT_MS": str(ACK_TIMEOUT_MS),
    "INTURN_WORKER_REVOKE_GRACE_MS": str(2 * ACK_TIMEOUT_MS),
    "INTURN_LOG_LEVEL": "WARNING",
}


@dataclass(frozen=True)
class Variant:
    """One configuration of the Kafka clients and topics: environment of every service, of the worker, of the
    webhook, and the topics' partition count."""

    name: str
    partitions: int
    common: dict[str, str] = field(default_factory=dict)
    worker: dict[str, str] = field(default_factory=dict)
    webhook: dict[str, str] = field(default_factory=dict)


#: The configuration before issue 42, spelled out so that it stays the baseline whatever the defaults become.
BASELINE = Variant(
    "baseline",
    12,
    {"INTURN_KAFKA_COMPRESSION": "lz4"},
    {
        "INTURN_WORKER_FETCH_WAIT_MAX_MS": "500",
        "INTURN_WORKER_FETCH_MIN_BYTES": "1",
        "INTURN_WORKER_ACKS_FETCH_WAIT_MAX_MS": "500",
        "INTURN_WORKER_ACKS_FETCH_MIN_BYTES": "1",
    },
    {"INTURN_WEBHOOK_KAFKA_LINGER_MS": "10"},
)
#: Today's defaults (nothing set).
DEFAULTS = Variant("defaults", 12)

VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        BASELINE,
        DEFAULTS,
        Variant(
            "fetch",
            12,
            {},
            {
                "INTURN_WORKER_FETCH_WAIT_MAX_MS": "50",
                "INTURN_WORKER_FETCH_MIN_BYTES": "65536",
                "INTURN_WORKER_ACKS_FETCH_WAIT_MAX_MS": "10",
                "INTURN_WORKER_ACKS_FETCH_MIN_BYTES": "65536",
            },
        ),
        Variant("partitions6", 6),
        Variant("partitions4", 4),
        Variant(
            "msgfetch",
            12,
            {},
            {"INTURN_WORKER_FETCH_WAIT_MAX_MS": "100", "INTURN_WORKER_FETCH_MIN_BYTES": "262144"},
        ),
        Variant("partitions3", 3),
        Variant("nocompress", 12, {"INTURN_KAFKA_COMPRESSION": "none"}),
        Variant("linger20", 12, {}, {}, {"INTURN_WEBHOOK_KAFKA_LINGER_MS": "20"}),
        Variant(
            "p4msgfetch",
            4,
            {},
            {"INTURN_WORKER_FETCH_WAIT_MAX_MS": "100", "INTURN_WORKER_FETCH_MIN_BYTES": "262144"},
        ),
        Variant(
            "p4msgfetchnone",
            4,
            {"INTURN_KAFKA_COMPRESSION": "none"},
            {"INTURN_WORKER_FETCH_WAIT_MAX_MS": "100", "INTURN_WORKER_FETCH_MIN_BYTES": "262144"},
        ),
    )
}


@dataclass(frozen=True)
class Plan:
    """Rate, rooms and durations of one run."""

    rate: float
    rooms: int
    idle_s: float
    warmup_s: float
    window_s: float


FULL = Plan(rate=300, rooms=ROOMS, idle_s=5, warmup_s=10, window_s=40)
QUICK = Plan(rate=200, rooms=1000, idle_s=3, warmup_s=5, window_s=15)
COMPONENTS = ("broker", "worker", "webhook", "sim")


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per component between two readings."""
    return {k: after[k] - before[k] for k in before}


def counter_delta(before: dict[tuple[str, str], int], after: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    """The broker's counters over a span (counters that appeared during it count from 0)."""
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def per_message(delta: dict[tuple[str, str], int], topics: dict[str, str], delivered: int) -> dict[str, Any]:
    """Records, produce and fetch requests per delivered message on each topic, and requests by type."""
    out: dict[str, Any] = {"topics": {}, "requests": {}}
    for role, topic in topics.items():
        out["topics"][role] = {
            "records": round(delta.get(("MessagesInPerSec", topic), 0) / delivered, 3),
            "produce_requests": round(delta.get(("TotalProduceRequestsPerSec", topic), 0) / delivered, 3),
            "fetch_requests": round(delta.get(("TotalFetchRequestsPerSec", topic), 0) / delivered, 3),
            "bytes_in": round(delta.get(("BytesInPerSec", topic), 0) / delivered, 1),
            "bytes_out": round(delta.get(("BytesOutPerSec", topic), 0) / delivered, 1),
        }
    for (kind, name), count in sorted(delta.items()):
        if kind == "requests":
            out["requests"][name] = round(count / delivered, 3)
    out["requests_total"] = round(sum(out["requests"].values()), 3)
    return out


def measure(
    kafka: LocalKafka, pg: LocalPostgres, metrics: BrokerMetrics, plan: Plan, variant: Variant, tag: str
) -> dict[str, Any]:
    """One variant: idle CPU, then CPU, broker counters and latencies over the window at ``plan.rate``."""
    name = f"pipe-{tag}"
    settings = fresh_topics(kafka.bootstrap, name, variant.partitions)
    workdir = Path(tempfile.mkdtemp(prefix=f"inturn-bench-{name}-"))
    line = Pipeline(
        settings,
        pg.dsn,
        workdir,
        group=f"bench-{name}",
        sim={**SIM_ENV, **variant.common},
        worker={**WORKER_ENV, **variant.common, **variant.worker},
        webhook={"INTURN_LOG_LEVEL": "WARNING", **variant.common, **variant.webhook},
    )
    broker_pid = kafka.pid
    if broker_pid is None:
        raise RuntimeError("the broker is not running")
    load_start = os.getloadavg()
    try:
        sim = line.start_sim()
        webhook = line.start_webhook()
        worker = line.add_worker("w1")
        line.wait_balanced()
        pids = {"broker": broker_pid, "worker": worker.pid, "webhook": webhook.pid, "sim": sim.pid}

        def cpu() -> dict[str, float]:
            return {k: proc_cpu_s(pid) for k, pid in pids.items()}

        time.sleep(1.0)  # the worker's first positioning settles before the idle reading
        idle0, t0 = cpu(), time.monotonic()
        time.sleep(plan.idle_s)
        idle = cpu_delta(idle0, cpu())
        idle_s = time.monotonic() - t0

        produced: dict[str, list[str]] = {}
        failure: list[BaseException] = []

        def feed() -> None:
            try:
                produced.update(produce_paced(settings, plan.rooms, plan.rate, plan.warmup_s + plan.window_s, name))
            except BaseException as exc:  # noqa: BLE001 - handed to the measuring thread, which raises it
                failure.append(exc)

        feeder = threading.Thread(target=feed, name="feed", daemon=True)
        feeder.start()
        time.sleep(plan.warmup_s)
        start_ms, cpu0, counters0 = now_ms(), cpu(), metrics.snapshot()
        time.sleep(plan.window_s)
        end_ms, cpu1, counters1 = now_ms(), cpu(), metrics.snapshot()
        load_end = os.getloadavg()
        feeder.join(120)
        if failure:
            raise failure[0]
        total = sum(len(ids) for ids in produced.values())
        with contextlib.suppress(TimeoutError):  # the figures then show what was not delivered
            wait_until(lambda: committed_total(settings, line.group) >= total, 60, "every message committed", every=0.5)
        events = read_events(settings)
        receipts = line.receipts()
    finally:
        line.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    window_s = (end_ms - start_ms) / 1000
    delivered = figures.accepted_in(receipts, start_ms, end_ms)
    if not delivered:
        raise RuntimeError(f"{name}: nothing delivered in the window")
    used = cpu_delta(cpu0, cpu1)
    idle_cores = {k: v / idle_s for k, v in idle.items()}
    roles = {
        "messages": settings.topic_messages,
        "acks": settings.topic_acks,
        "events": settings.topic_events,
        "dlq": settings.topic_dlq,
    }
    latency = figures.latencies(events, receipts, start_ms, end_ms, partition_turns=False)
    return {
        "variant": variant.name,
        "partitions": variant.partitions,
        "env": {"common": variant.common, "worker": variant.worker, "webhook": variant.webhook},
        "load_average": {"start": [round(v, 2) for v in load_start], "end": [round(v, 2) for v in load_end]},
        "window_s": round(window_s, 2),
        "produced": total,
        "delivered_in_window": delivered,
        "delivered_msgs_per_s": round(delivered / window_s, 1),
        "idle_cores": {k: round(v, 4) for k, v in idle_cores.items()},
        "cpu_us_per_message": {k: round(v / delivered * 1e6, 1) for k, v in used.items()},
        "cpu_us_per_message_less_idle": {
            k: round(max(0.0, v - idle_cores[k] * window_s) / delivered * 1e6, 1) for k, v in used.items()
        },
        "broker": per_message(counter_delta(counters0, counters1), roles, delivered),
        "latency_ms": {
            "turn_to_sent": latency["turn_to_sent_ms"],
            "ack": latency["ack_at_worker_minus_injected_ms"],
            "webhook_to_worker": latency["webhook_to_worker_ms"],
            "consumed_to_sent": latency["consumed_to_sent_ms"],
        },
        "ack_timeouts": latency["ack_timeouts"],
        "receipts": figures.verdict(check(receipts, produced), produced, receipts, ACK_TIMEOUT_MS),
    }


def compare(run: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """A variant against the baseline of the same round: CPU ratios, latency differences, the issue's bounds."""

    def ratio(component: str) -> float | None:
        b = baseline["cpu_us_per_message"][component]
        return round(run["cpu_us_per_message"][component] / b, 3) if b else None

    def p99_delta(which: str) -> float | None:
        a, b = run["latency_ms"][which]["p99"], baseline["latency_ms"][which]["p99"]
        return None if a is None or b is None else round(a - b, 1)

    ratios = {c: ratio(c) for c in COMPONENTS}
    deltas = {"turn_to_sent_p99_ms": p99_delta("turn_to_sent"), "ack_p99_ms": p99_delta("ack")}
    broker, worker, webhook = ratios["broker"], ratios["worker"], ratios["webhook"]
    return {
        "cpu_ratio": ratios,
        "p99_delta": deltas,
        "broker_at_most_half": broker is not None and broker <= 0.5,
        "latency_within_10ms": all(d is not None and d <= 10 for d in deltas.values()),
        "worker_webhook_not_above": worker is not None and worker <= 1 and webhook is not None and webhook <= 1,
    }


def bench(plan: Plan, names: list[str], repeats: int) -> dict[str, Any]:
    """Every variant of ``names`` (the baseline first in each round), ``repeats`` rounds."""
    if "baseline" not in names:
        names = ["baseline", *names]
    names = ["baseline", *(n for n in names if n != "baseline")]
    started = time.time()
    code = code_version()
    rounds: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        # A loaded box (load average 30 on 2 cores) took more than the launcher's default minute to start Kafka.
        kafka = LocalKafka(heap_mb=768, jmx=True)
        stack.callback(kafka.cleanup)
        kafka.start(timeout=300)
        pg = stack.enter_context(LocalPostgres())
        metrics = BrokerMetrics(kafka)
        try:
            metrics.snapshot()  # the helper's start-up (a JVM) before any window
            # The broker's JIT compiles its produce and fetch paths in its first minute of traffic: a short run of
            # the baseline, not counted, so that the first variant measured does not pay for it.
            warm = Plan(plan.rate, plan.rooms, 1, 3, min(10, plan.window_s))
            print("-- warm-up (not counted)", flush=True)
            with contextlib.suppress(Exception):
                measure(kafka, pg, metrics, warm, BASELINE, f"warmup-{int(started)}")
            for r in range(repeats):
                runs: dict[str, Any] = {}
                for n in names:
                    print(f"-- round {r + 1}: {n}", flush=True)
                    try:
                        runs[n] = measure(kafka, pg, metrics, plan, VARIANTS[n], f"{n}-{r}-{int(started)}")
                    except Exception as exc:  # noqa: BLE001 - one failed variant must not hide the others
                        print(f"variant {n} failed: {exc!r}", file=sys.stderr, flush=True)
                        runs[n] = {"variant": n, "error": repr(exc)}
                base = runs.get("baseline", {})
                for n, result in runs.items():
                    if n != "baseline" and "error" not in result and "error" not in base:
                        result["vs_baseline"] = compare(result, base)
                rounds.append(runs)
        finally:
            metrics.close()
    return {
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(started)),
        "duration_s": round(time.time() - started, 1),
        "code": code,
        "kafka": KAFKA_VERSION,
        "cpus": len(os.sched_getaffinity(0)),
        "setup": {
            "rate_msgs_per_s": plan.rate,
            "rooms": plan.rooms,
            "idle_s": plan.idle_s,
            "warmup_s": plan.warmup_s,
            "window_s": plan.window_s,
            "payload_bytes": PAYLOAD_BYTES,
            "lost_share": LOST_SHARE,
            "ack_timeout_ms": ACK_TIMEOUT_MS,
            "statuses": ["sent", "delivered", "read"],
            "statuses_per_callback": 1,
            "workers": 1,
        },
        "variants": {n: _describe(VARIANTS[n]) for n in names},
        "rounds": rounds,
    }


def _describe(v: Variant) -> dict[str, Any]:
    return {"partitions": v.partitions, "common": v.common, "worker": v.worker, "webhook": v.webhook}


#: What ``make bench`` runs against the baseline: the candidates of issue 42 that measured below the baseline's broker
#: CPU on a loaded box (fewer partitions, fuller fetches of the messages consumer, no compression), alone and
#: together. None has become a default: none reached half the baseline's broker CPU in a run there (docs/benchmarks.md).
RUN_VARIANTS = ["partitions4", "msgfetch", "p4msgfetch", "p4msgfetchnone"]


def run(quick: bool) -> dict[str, Any]:
    """The baseline against the candidates, once (quick: a smaller plan)."""
    return bench(QUICK if quick else FULL, RUN_VARIANTS, 1)


def main(argv: list[str] | None = None) -> int:
    """Chosen variants, for development: ``python -m benchmarks.bench_pipeline --variants fetch partitions3``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pipeline", description=__doc__)
    parser.add_argument("--variants", nargs="+", default=RUN_VARIANTS, choices=sorted(VARIANTS))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--rate", type=float)
    parser.add_argument("--window", type=float)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("var/bench/pipeline-dev.json"))
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.rate or args.window:
        plan = Plan(args.rate or plan.rate, plan.rooms, plan.idle_s, plan.warmup_s, args.window or plan.window_s)
    result = bench(plan, args.variants, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
