"""The worker's cost: CPU per delivered message against two bare POSTs of the same body to the same simulator, both
measured in the same run (a bare aiohttp client, and a bare client on the adapters' own transport); the records
the worker writes per delivered message; and the resident memory of one worker holding 25k rooms at once.

The CPU figures come from rounds, each a worker run followed by one run of each baseline (aiohttp, transport,
worker, aiohttp, transport, worker, ...): the headline ratios are the worker's CPU over all its runs against
each baseline's over all of its, and each round's own ratio (against the baseline runs on either side of it)
shows how far one run can be trusted. The bare POST through the worker's own transport is the lower bound of
the send itself: the worker against it is everything else the worker does per message (consume, order, wait
for the ack, record the outcome, commit).

Everything is a separate process (simulator, webhook, worker, bare clients) so each one's CPU time is its own,
read from /proc (the worker, and the webhook: its CPU per delivered message, every status callback of the
run's messages, over the same window as the worker's) or getrusage (the bare clients).

Where the worker's CPU beyond the ordered floor goes is counted too: the Python calls per message on the worker's
event loop and on the ordered floor's (cProfile, one run each over the same load; a count the machine's noise leaves
alone).

Records per delivered message are counted from the topics, not from the worker's counters: the records on the
run's own events and dead-letter topics (nothing but the worker writes there in this run) over the messages it
finished.
"""

from __future__ import annotations

import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from benchmarks import code_version, fresh_topics
from inturn.kafka import committed_total, make_consumer
from inturn.settings import KafkaSettings
from inturn.settings.webhook import WebhookSettings
from inturn_devtools import LocalKafka, LocalPostgres
from inturn_devtools.pipeline import ACCESS_TOKEN, PHONE_NUMBER_ID, Pipeline
from inturn_devtools.services import MALLOC_ENV
from inturn_devtools.waiting import wait_until

FLOOR = "floor"  # benchmarks.floor_worker: what any worker must do per message (Kafka both sides of the send)
ORDERED_FLOOR = "ordered_floor"  # the floor with each room's next send only after its ack (``--ordered``)
#: The ordered floor written without a task or future per room or message (``--callbacks``)
ORDERED_FLOOR_CALLBACKS = "ordered_floor_callbacks"
#: bare_post clients (aiohttp, the adapters' transport), the floor and the ordered floor written both ways
BASELINES = ("aiohttp", "inturn", FLOOR, ORDERED_FLOOR, ORDERED_FLOOR_CALLBACKS)
#: The webhook as installed: its statuses split at the default (on), set explicitly so that an
#: INTURN_WEBHOOK_STATUSES_SPLIT in the bench's own environment cannot give the worker runs and the floor another one.
STATUSES_SPLIT: bool = WebhookSettings.model_fields["webhook_statuses_split"].default
WEBHOOK_ENV = {"INTURN_WEBHOOK_STATUSES_SPLIT": "true" if STATUSES_SPLIT else "false"}
#: Statuses per message on the acks topic, which a worker reads (and so the floor): of the simulator's 'sent' and
#: 'delivered' (read rate 0, nothing dropped), the split keeps only the deciding 'sent' there and puts 'delivered' on
#: the statuses topic, which no worker reads. With two here the floor waited for statuses that never came and failed
#: after its 600 s (every worker bench from the split's merge until 2026-11-28 14:40 UTC).
STATUSES_PER_MESSAGE = 1 if STATUSES_SPLIT else 2
NO_POSTGRES = "postgresql://unused@127.0.0.1:1/unused"  # the bare POSTs and the floor keep no cursor


@dataclass(frozen=True)
class Workload:
    """The messages of a run (``per_room`` to each of ``rooms`` rooms, ``payload_bytes`` of text each) and the
    environment of its simulator and worker: the same for the worker's runs and the floor's."""

    rooms: int
    per_room: int
    payload_bytes: int
    sim_env: dict[str, str]
    worker_env: dict[str, str]

    def produce(self, line: Pipeline, prefix: str) -> int:
        """The messages, produced through ``line`` with ids starting ``prefix``; how many."""
        return line.produce(rooms=self.rooms, per_room=self.per_room, prefix=prefix, payload_bytes=self.payload_bytes)


def _scenario(kafka: LocalKafka, pg: LocalPostgres, name: str, load: Workload, within: float) -> dict[str, Any]:
    settings = fresh_topics(kafka.bootstrap, name, 4)
    workdir = Path(tempfile.mkdtemp(prefix=f"inturn-bench-{name}-"))
    line = Pipeline(
        settings, pg.dsn, workdir, group=f"bench-{name}", sim=load.sim_env, worker=load.worker_env, webhook=WEBHOOK_ENV
    )
    line.start_sim()
    webhook = line.start_webhook()
    worker = line.add_worker("w1")
    try:
        line.wait_balanced()
        cpu0, webhook_cpu0 = worker.cpu_seconds(), webhook.cpu_seconds()
        t0 = time.monotonic()
        total = load.produce(line, name)
        peak_rooms = 0.0

        def done() -> bool:
            nonlocal peak_rooms
            if committed_total(settings, line.group) >= total:
                return True
            peak_rooms = max(peak_rooms, line.worker_gauge("w1", "inturn_worker_active_rooms", timeout=15) or 0.0)
            return False

        wait_until(done, within, f"{name}: every message committed", every=0.5)
        wall = time.monotonic() - t0
        cpu = worker.cpu_seconds() - cpu0
        webhook_cpu = webhook.cpu_seconds() - webhook_cpu0  # every status callback of the run's messages
        rss, peak_rss = worker.rss_mb()
        report = line.report()
        records = records_on(settings, settings.topic_events) + records_on(settings, settings.topic_dlq)
        return {
            "messages": total,
            "records_written": records,
            "records_per_message": round(records / total, 3),
            "rooms": load.rooms,
            "wall_s": round(wall, 2),
            "msgs_per_s": round(total / wall, 1),
            "worker_cpu_s": round(cpu, 3),
            "worker_cpu_us_per_message": round(cpu / total * 1e6, 1),
            "webhook_cpu_s": round(webhook_cpu, 3),
            "webhook_cpu_us_per_message": round(webhook_cpu / total * 1e6, 1),
            "worker_rss_mb": round(rss, 1),
            "worker_peak_rss_mb": round(peak_rss, 1),
            "peak_active_rooms": peak_rooms,
            "lost": report.lost,
            "reordered": report.reordered,
            "duplicated": report.duplicated,
        }
    finally:
        line.stop()


def records_on(settings: KafkaSettings, topic: str) -> int:
    """Records on ``topic`` (the sum of its partitions' end offsets: a benchmark's own topics start empty)."""
    consumer = make_consumer(settings, f"{topic}-count")
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
    finally:
        consumer.close()


def _bare(
    kafka: LocalKafka,
    requests: int,
    concurrency: int,
    recipients: int,
    payload_bytes: int,
    sim_env: dict[str, str],
    client: str,
) -> dict[str, Any]:
    settings = fresh_topics(kafka.bootstrap, "bare", 4)
    workdir = Path(tempfile.mkdtemp(prefix="inturn-bench-bare-"))
    with Pipeline(settings, NO_POSTGRES, workdir, sim=sim_env, webhook=WEBHOOK_ENV) as line:
        line.start()
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
                "--client",
                client,
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        result: dict[str, Any] = json.loads(out)
        return result


def _floor(
    kafka: LocalKafka, load: Workload, ordered: bool = False, callbacks: bool = False, profile: Path | None = None
) -> dict[str, Any]:
    """``benchmarks.floor_worker`` over the same messages, simulator and webhook as a worker run; its own CPU. Then its
    Kafka part alone; or, ``ordered``, the floor with ordering (on topics of its own: an earlier run's statuses on
    the acks topic would acknowledge its messages before they were sent), with ``callbacks`` written without a task
    per room. With ``profile``, run under cProfile, its stats written there."""
    name = f"floor-{uuid.uuid4().hex[:6]}"  # its own topics each run: it reads the acks topic from the start
    settings = fresh_topics(kafka.bootstrap, name, 4)
    workdir = Path(tempfile.mkdtemp(prefix="inturn-bench-floor-"))
    with Pipeline(
        settings, NO_POSTGRES, workdir, sim=load.sim_env, worker=load.worker_env, webhook=WEBHOOK_ENV
    ) as line:
        line.start()
        total = load.produce(line, name)
        env = {**os.environ, **MALLOC_ENV, **line.worker_settings_env("floor")}  # as a worker's

        def floor(*flags: str) -> dict[str, Any]:
            out = subprocess.run(
                [
                    sys.executable,
                    *(["-m", "cProfile", "-o", str(profile)] if profile is not None else []),
                    "-m",
                    "benchmarks.floor_worker",
                    str(total),
                    str(STATUSES_PER_MESSAGE),
                    *flags,
                ],
                check=True,
                capture_output=True,
                text=True,
                env=env,
            ).stdout
            result: dict[str, Any] = json.loads(out.splitlines()[-1])
            # The bare POSTs' field names, so the floor pools and rounds like them.
            return {**result, "requests": result["messages"], "cpu_us_per_request": result["cpu_us_per_message"]}

        if ordered:
            return floor("--callbacks" if callbacks else "--ordered")
        # Then its Kafka part alone, over the same messages and the statuses the first run brought.
        return {**floor(), "kafka_part": floor("--without-post")}


def _pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Baseline runs as one: CPU per request over all of them, and each run's own figure in order."""
    requests = sum(r["requests"] for r in runs)
    cpu_s = sum(r["cpu_s"] for r in runs)
    return {
        "requests": requests,
        "failures": sum(r.get("failures", 0) for r in runs),
        "cpu_s": cpu_s,
        "wall_s": sum(r["wall_s"] for r in runs),
        "cpu_us_per_request": cpu_s / requests * 1e6,
        "cpu_us_per_request_runs": [r["cpu_us_per_request"] for r in runs],
    }


def _rounds(scenarios: list[dict[str, Any]], bares: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each worker run against each baseline's two runs on either side of it (run i before, run i + 1 after)."""
    rounds = []
    for i, run in enumerate(scenarios):
        worker = run["worker_cpu_us_per_message"]
        row: dict[str, Any] = {"worker_cpu_us_per_message": worker}
        for client, runs in bares.items():
            beside = _pooled(runs[i : i + 2])["cpu_us_per_request"]
            row[f"bare_{client}_cpu_us_per_request"] = round(beside, 1)
            row[f"ratio_vs_{client}"] = round(worker / beside, 3)
        rounds.append(row)
    return rounds


def _worker_total(scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    """Worker runs as one: CPU per message over all of them; the receipt checker's findings added up."""
    messages = sum(s["messages"] for s in scenarios)
    cpu_s = sum(s["worker_cpu_s"] for s in scenarios)
    wall_s = sum(s["wall_s"] for s in scenarios)
    return {
        "messages": messages,
        "rooms": scenarios[0]["rooms"],
        "wall_s": round(wall_s, 2),
        "msgs_per_s": round(messages / wall_s, 1),
        "worker_cpu_s": round(cpu_s, 3),
        "worker_cpu_us_per_message": round(cpu_s / messages * 1e6, 1),
        "webhook_cpu_us_per_message": round(sum(s["webhook_cpu_s"] for s in scenarios) / messages * 1e6, 1),
        "webhook_cpu_us_per_message_runs": [s["webhook_cpu_us_per_message"] for s in scenarios],
        "records_written": sum(s["records_written"] for s in scenarios),
        "records_per_message": round(sum(s["records_written"] for s in scenarios) / messages, 3),
        "worker_rss_mb": max(s["worker_rss_mb"] for s in scenarios),
        "worker_peak_rss_mb": max(s["worker_peak_rss_mb"] for s in scenarios),
        "peak_active_rooms": max(s["peak_active_rooms"] for s in scenarios),
        "lost": sum(s["lost"] for s in scenarios),
        "reordered": sum(s["reordered"] for s in scenarios),
        "duplicated": sum(s["duplicated"] for s in scenarios),
        "runs": scenarios,
    }


Stats = dict[tuple[str, int, str], tuple[int, int, float, float, Any]]


def per_message_calls(stats: Stats, messages: int) -> dict[str, float]:
    """Calls per message of the functions called at least once per two messages (the per-message path: start-up
    and periodic work fall below that), of Python functions and of built-ins ("~" for a file) apart. ``stats`` is
    ``pstats.Stats(...).stats``: function -> (primitive calls, calls, own time, cumulative time, callers)."""
    python = builtin = 0
    for (file, _, _), (_, calls, _, _, _) in stats.items():
        if calls * 2 >= messages:
            if file == "~":
                builtin += calls
            else:
                python += calls
    return {"python": round(python / messages, 1), "builtin": round(builtin / messages, 1)}


def _profile(path: Path) -> Stats:
    """What a cProfile file holds: ``pstats.Stats``'s ``stats`` attribute, which its own methods read. It is not
    documented, but no documented accessor keeps functions of one name in different files apart
    (``get_stats_profile`` keys them by name alone)."""
    stats: Stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]  # typeshed leaves the attribute out
    return stats


def _calls(kafka: LocalKafka, pg: LocalPostgres, load: Workload) -> dict[str, Any]:
    """Python calls per delivered message on the worker's event loop (its own ``INTURN_WORKER_PROFILE``: cProfile on
    the main thread, from start to exit) and on the ordered floor's (all of it on one thread), over the same load:
    a count, not a time, so the machine's noise leaves it alone."""
    profiles = Path(tempfile.mkdtemp(prefix="inturn-bench-calls-"))
    name = "calls"
    settings = fresh_topics(kafka.bootstrap, name, 4)
    line = Pipeline(
        settings, pg.dsn, profiles, group=f"bench-{name}", sim=load.sim_env, worker=load.worker_env, webhook=WEBHOOK_ENV
    )
    line.start_sim()
    line.start_webhook()
    line.add_worker("w1", INTURN_WORKER_PROFILE=str(profiles / "worker.prof"))
    try:
        line.wait_balanced()
        total = load.produce(line, name)
        wait_until(lambda: committed_total(settings, line.group) >= total, 600, f"{name}: every message committed")
    finally:
        line.stop()  # the worker writes its profile on exit
    floor = _floor(kafka, load, ordered=True, profile=profiles / "floor.prof")
    worker_calls = per_message_calls(_profile(profiles / "worker.prof"), total)
    floor_calls = per_message_calls(_profile(profiles / "floor.prof"), floor["messages"])
    return {
        "messages": total,
        "worker": worker_calls,
        "ordered_floor": floor_calls,
        "ratio_python_worker_vs_ordered_floor": round(worker_calls["python"] / floor_calls["python"], 2),
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
    line = Pipeline(settings, pg.dsn, workdir, group=f"bench-{name}", sim=sim_env, worker=env, webhook=WEBHOOK_ENV)
    line.start_sim()
    line.start_webhook()
    worker = line.add_worker("w1")
    try:
        line.wait_balanced()  # as the CPU scenarios: the worker owns every partition before the messages come
        line.configure_sim({"withhold_recipients": [f"49170{r:07d}" for r in range(rooms)]})
        idle_rss, _ = worker.rss_mb()
        t0 = time.monotonic()
        total = line.produce(rooms=rooms, per_room=2, prefix=name, payload_bytes=1024)
        wait_until(lambda: line.stats()["accepted"] >= rooms, 600, f"{name}: every room's first send", every=0.5)
        rss, _ = worker.rss_mb()
        filled = time.monotonic() - t0
        line.configure_sim({"withhold_recipients": []})
        wait_until(lambda: committed_total(settings, line.group) >= total, 600, f"{name}: drained", every=0.5)
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
    """CPU per message (worker vs each bare POST, same run), records per message, RSS with 25k rooms in flight."""
    rooms, per_room = (500, 10) if quick else (2000, 10)
    sim_env = {
        "INTURN_SIM_LATENCY_MEDIAN_MS": "20",
        "INTURN_SIM_LATENCY_P99_MS": "60",
        "INTURN_SIM_LATENCY_MAX_MS": "200",
        "INTURN_SIM_DROP_RATE": "0",
    }
    worker_env = {"INTURN_WORKER_ACK_TIMEOUT_MS": "5000", "INTURN_LOG_LEVEL": "WARNING"}
    rounds = 1 if quick else 3
    code = code_version()
    concurrency = min(rooms, 200)
    load = Workload(rooms, per_room, 1024, sim_env, worker_env)

    def bare(client: str) -> dict[str, Any]:
        if client in (FLOOR, ORDERED_FLOOR, ORDERED_FLOOR_CALLBACKS):
            return _floor(kafka, load, ordered=client != FLOOR, callbacks=client == ORDERED_FLOOR_CALLBACKS)
        return _bare(kafka, rooms * per_room, concurrency, rooms, load.payload_bytes, sim_env, client)

    with LocalKafka(heap_mb=768) as kafka, LocalPostgres() as pg:
        # On a shared or virtual machine one measurement of a baseline moves by a quarter between runs, and a ratio
        # is only as steady as its denominator: the worker runs several times, each between two runs of each.
        bares = {client: [bare(client)] for client in BASELINES}
        scenarios = []
        for i in range(1, rounds + 1):
            scenarios.append(_scenario(kafka, pg, f"cpu{i}", load, within=600))
            for client in BASELINES:
                bares[client].append(bare(client))
        calls = _calls(kafka, pg, load)
        memory = _rooms_in_flight(kafka, pg, 5000 if quick else 25_000, sim_env, worker_env)
    aiohttp, transport, floor = _pooled(bares["aiohttp"]), _pooled(bares["inturn"]), _pooled(bares[FLOOR])
    ordered = _pooled(bares[ORDERED_FLOOR])
    by_callbacks = _pooled(bares[ORDERED_FLOOR_CALLBACKS])
    kafka_part = _pooled([run["kafka_part"] for run in bares[FLOOR]])
    cpu = _worker_total(scenarios)
    worker_us = cpu["worker_cpu_us_per_message"]
    return {
        "bare_post": aiohttp,
        "bare_post_transport": transport,
        "floor": floor,
        "cpu_ratio_worker_vs_floor": round(worker_us / floor["cpu_us_per_request"], 3),
        # What waiting for each ack before the room's next send costs by itself, and the worker beyond that.
        "ordered_floor": ordered,
        "cpu_ratio_ordered_floor_vs_floor": round(ordered["cpu_us_per_request"] / floor["cpu_us_per_request"], 3),
        "cpu_ratio_worker_vs_ordered_floor": round(worker_us / ordered["cpu_us_per_request"], 3),
        # The same ordering without a task or future per room or message: whether the ordered floor's price is ordering
        # itself or the way its waiting is written.
        "ordered_floor_callbacks": by_callbacks,
        "cpu_ratio_ordered_floor_callbacks_vs_floor": round(
            by_callbacks["cpu_us_per_request"] / floor["cpu_us_per_request"], 3
        ),
        "cpu_ratio_floor_vs_bare_post_transport": round(
            floor["cpu_us_per_request"] / transport["cpu_us_per_request"], 3
        ),
        # The least a worker can cost against the bare POST: the POST itself plus the floor's Kafka part.
        "floor_kafka_part": kafka_part,
        "cpu_ratio_least_worker_vs_bare_post_transport": round(
            1 + kafka_part["cpu_us_per_request"] / transport["cpu_us_per_request"], 3
        ),
        "worker": cpu,
        "cpu_ratio_worker_vs_bare_post": round(worker_us / aiohttp["cpu_us_per_request"], 3),
        "cpu_ratio_worker_vs_bare_post_transport": round(worker_us / transport["cpu_us_per_request"], 3),
        "cpu_ratio_bare_transport_vs_bare_aiohttp": round(
            transport["cpu_us_per_request"] / aiohttp["cpu_us_per_request"], 3
        ),
        # Where the worker's CPU beyond the ordered floor goes: Python calls on its event loop per message.
        "calls_per_message": calls,
        "rounds": _rounds(scenarios, bares),
        "target_ratio": 0.76,
        "target_ratio_floor": 1.3,
        "target_ratio_transport": 1.3,
        "records_per_message": cpu["records_per_message"],
        "target_records_per_message": 1,
        "rooms_in_flight": memory,
        "target_rss_mb": 250,
        "code": code,
    }
