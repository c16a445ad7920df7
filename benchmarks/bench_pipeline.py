"""The whole pipeline's cost per delivered message, as the platforms call it: broker, worker, webhook and bridge.

One Kafka broker (JMX on loopback) and one PostgreSQL for the run; per variant of the Kafka clients' configuration,
on fresh topics:

1. simulator + webhook + one worker in ack mode; the simulator calls back one status per request (``sent``,
   ``delivered``, ``read``; 12% of the messages lose every callback), as WhatsApp Cloud and Twilio do, not in
   batches (docs/platform-simulator.md, Callbacks);
2. idle: every process's CPU (from /proc) over a few seconds with no traffic, stated beside the figures;
3. messages written to the messages topic at a stated rate (rooms in turn, spread over ``ACCOUNTS`` sending accounts)
   by a producer with the bridge's producer configuration; after a warm-up, a window over which each process's CPU,
   the broker's own counters (JMX: requests by type, records and requests per topic) and the backlog (messages
   offered less the worker group's committed offsets) are read at both ends;
4. the producer stops, the worker finishes; the receipt log gives the messages delivered in the window (sends the
   simulator accepted), the worker's events its turn->sent and ack latencies (``matrix_figures.latencies``: the
   worker's own timestamps, finer than its histograms' buckets).

The bridge is measured in a stage of its own (``bridge_stage``), not in front of every variant: the Pub/Sub emulator
takes most of a core of a 2-core box at these rates, and beside the broker, worker, webhook and simulator it would
starve them all and measure the box, not the pipeline. There, at the same rate, a publisher writes the same messages
to the emulator (ordering key = room), a pull-mode bridge process writes them to Kafka, and the bridge's CPU per
message written (and, stated apart, the emulator's) is read over a window. The bridge's work does not depend on the
variants' settings of the worker and webhook.

Two runs: at the stated rate, and at the box's sustainable rate (``sustainable_rate``: the highest of a few rates
whose backlog does not grow over a short window, searched with the baseline). Every variant is compared with
``baseline`` (the configuration before issue 42) measured in the same run, in alternation when repeated.
``python -m benchmarks.bench_pipeline --help`` runs chosen variants, rates and repeats;
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition
from google.cloud import pubsub_v1

from benchmarks import code_version, fresh_topics
from benchmarks import matrix_figures as figures
from benchmarks.bench_half_load import produce_paced
from benchmarks.bench_matrix import PAYLOAD_BYTES, read_events
from inturn.kafka import committed_total, make_consumer
from inturn.schemas import now_ms
from inturn.settings import KafkaSettings
from inturn_bridge.subscription import ensure
from inturn_devtools import KAFKA_VERSION, LocalKafka, LocalPostgres, LocalPubSub
from inturn_devtools.kafka import BrokerMetrics
from inturn_devtools.pipeline import PHONE_NUMBER_ID, Pipeline, message_value
from inturn_devtools.receipts import check
from inturn_devtools.waiting import wait_until

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

ROOMS = 2000
#: WhatsApp sending accounts (phone_number_id) the rooms are spread over: each has its own token bucket and breaker
#: in the worker, as a business with many numbers has.
ACCOUNTS = 50
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
    #: Settled statuses off the acks topic (``INTURN_WEBHOOK_STATUSES_SPLIT``): off unless the variant is about it,
    #: so that each other candidate is measured alone against the baseline.
    statuses_split: bool = False
    #: Partitions of the events or statuses topic (by role) where not ``partitions``: nothing reads them by room
    #: partition but a new owner's ends read (events partition = messages partition modulo the events count).
    fewer: dict[str, int] = field(default_factory=dict)

    def webhook_env(self) -> dict[str, str]:
        """The webhook's settings of this variant, the split spelled out."""
        return {"INTURN_WEBHOOK_STATUSES_SPLIT": "true" if self.statuses_split else "false", **self.webhook}


#: The configuration before issue 42, spelled out so that it stays the baseline whatever the defaults become.
BASELINE = Variant(
    "baseline",
    12,
    {"INTURN_KAFKA_COMPRESSION": "lz4", "INTURN_KAFKA_LINGER_MS": "5"},
    {
        "INTURN_WORKER_FETCH_WAIT_MAX_MS": "500",
        "INTURN_WORKER_FETCH_MIN_BYTES": "1",
        "INTURN_WORKER_ACKS_FETCH_WAIT_MAX_MS": "500",
        "INTURN_WORKER_ACKS_FETCH_MIN_BYTES": "1",
    },
    {"INTURN_WEBHOOK_KAFKA_LINGER_MS": "10"},
)
#: Fuller fetches of the messages consumer: at most every 100 ms, or 256 KiB (today's default).
MSG_FETCH = {"INTURN_WORKER_FETCH_WAIT_MAX_MS": "100", "INTURN_WORKER_FETCH_MIN_BYTES": "262144"}
#: The acks reader's fetch held up to 10 ms for 64 KiB: at most 100 fetches a second, whatever the webhook's rate.
ACKS_FETCH10 = {"INTURN_WORKER_ACKS_FETCH_WAIT_MAX_MS": "10", "INTURN_WORKER_ACKS_FETCH_MIN_BYTES": "65536"}
#: Today's defaults (nothing set but what the defaults are).
DEFAULTS = Variant("defaults", 12)
#: Today's defaults on topics sized for the rate (docs/operations.md, Sizing): one worker's load, so 2 partitions of
#: messages and acks (twice the workers), one of events (``INTURN_TOPIC_EVENTS_PARTITIONS``); the statuses split off
#: (measured by ``sizedsplit`` beside it).
SIZED = Variant("sized", 2, fewer={"events": 1})
#: That with settled statuses off the acks topic (the default), on a statuses topic of one partition.
SIZED_SPLIT = Variant("sizedsplit", 2, statuses_split=True, fewer={"events": 1, "statuses": 1})
#: As ``sized`` on 4 partitions of messages and acks.
SIZED4 = Variant("sized4", 4, fewer={"events": 1})

VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        BASELINE,
        DEFAULTS,
        SIZED,
        SIZED_SPLIT,
        SIZED4,
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
        Variant("statuses", 12, statuses_split=True),
        Variant(
            "p4msgfetchstatuses",
            4,
            {},
            {"INTURN_WORKER_FETCH_WAIT_MAX_MS": "100", "INTURN_WORKER_FETCH_MIN_BYTES": "262144"},
            statuses_split=True,
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
        Variant("p4acks10", 4, {}, {**MSG_FETCH, **ACKS_FETCH10}),
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
#: The sustainable-rate search: these multiples of the plan's rate, in order, each over a short window; the search
#: stops at the first whose backlog grows by more than ``BACKLOG_GROWTH_MAX`` of the messages offered in the window.
#: The warm-up outlasts the ack timeout: until the first lost callbacks time out, the committed offsets (held at each
#: partition's oldest message without an outcome) fall behind even at a rate the box carries. The margin (2 s of
#: messages over the window) covers commits every second and timeouts that end in waves.
SEARCH_FACTORS = (1.0, 1.5, 2.0, 3.0)
#: The uncounted warm-up's window (seconds of traffic before the first variant).
WARM_S = 60.0
SEARCH_WARMUP_S = ACK_TIMEOUT_MS / 1000 + 5
SEARCH_WINDOW_S = 20.0
BACKLOG_GROWTH_MAX = 0.1
PUBSUB_PROJECT = "inturn-bench"


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


#: The broker JVM's just-in-time compiler threads, by the names /proc gives them (HotSpot's "C1 CompilerThread0",
#: "C2 CompilerThread1", ..., cut to 15 characters). A broker compiles its produce and fetch paths over its first
#: minutes of traffic: on 2026-11-28 (23:46-23:48 UTC, the baseline at 150 msg/s after the bench's 10 s warm-up)
#: they took 0.2 to 0.56 of a core during the window, against 0.3-0.4 for the broker's network and request threads.
#: A broker that has served for hours spends nearly nothing there, and a variant measured after others inherits
#: their compiled code: the broker's figure is given with them and without them (``broker_jit``,
#: ``broker_less_jit``).
JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")


def threads_cpu_s(pid: int, names: tuple[str, ...]) -> float:
    """User + system CPU seconds of the threads of process ``pid`` whose name starts with one of ``names``."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if not (task / "comm").read_text().startswith(names):
                continue
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        total += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    return total


def group_cpu_s(pgid: int) -> float:
    """User + system CPU seconds of every live process of process group ``pgid`` (the emulator is a launcher script
    and a JVM)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[2]) == pgid:
            total += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    return total


def messages_written(settings: KafkaSettings) -> int:
    """The records on the messages topic (the sum of its partitions' end offsets)."""
    consumer = make_consumer(settings, "bench-end-offsets")
    try:
        topic = settings.topic_messages
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
    finally:
        consumer.close()


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per component between two readings."""
    return {k: after[k] - before[k] for k in before}


def counter_delta(before: dict[tuple[str, str], int], after: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    """The broker's counters over a span (counters that appeared during it count from 0)."""
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


#: RequestMetrics names that count again, by the fetcher's kind, what ``Fetch`` already counts.
FETCH_SUBTYPES = frozenset({"FetchConsumer", "FetchFollower"})


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
    # The broker's RequestMetrics mark a consumer's (or a follower's) fetch under ``Fetch`` and again under
    # ``FetchConsumer`` (``FetchFollower``): counted once.
    out["requests_total"] = round(sum(v for k, v in out["requests"].items() if k not in FETCH_SUBTYPES), 3)
    return out


def measure(
    kafka: LocalKafka, pg: LocalPostgres, metrics: BrokerMetrics, plan: Plan, variant: Variant, tag: str
) -> dict[str, Any]:
    """One variant: idle CPU, then CPU, broker counters and latencies over the window at ``plan.rate``."""
    name = f"pipe-{tag}"
    settings = fresh_topics(
        kafka.bootstrap,
        name,
        variant.partitions,
        variant.fewer.get("events", 0),
        variant.fewer.get("statuses", 0),
    )
    # The messages come from a producer with the bridge's settings: the variant's, where it sets them.
    linger = int(variant.common.get("INTURN_KAFKA_LINGER_MS", settings.kafka_linger_ms))
    compression = variant.common.get("INTURN_KAFKA_COMPRESSION", settings.kafka_compression)
    feed_settings = settings.model_copy(update={"kafka_linger_ms": linger, "kafka_compression": compression})
    workdir = Path(tempfile.mkdtemp(prefix=f"inturn-bench-{name}-"))
    line = Pipeline(
        settings,
        pg.dsn,
        workdir,
        group=f"bench-{name}",
        sim={**SIM_ENV, **variant.common},
        worker={**WORKER_ENV, **variant.common, **variant.worker},
        webhook={"INTURN_LOG_LEVEL": "WARNING", **variant.common, **variant.webhook_env()},
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
            jit = {"broker_jit": threads_cpu_s(broker_pid, JIT_THREADS)}
            return {**{k: proc_cpu_s(pid) for k, pid in pids.items()}, **jit}

        time.sleep(1.0)  # the worker's first positioning settles before the idle reading
        idle0, t0 = cpu(), time.monotonic()
        time.sleep(plan.idle_s)
        idle = cpu_delta(idle0, cpu())
        idle_s = time.monotonic() - t0

        produced: dict[str, list[str]] = {}
        failure: list[BaseException] = []

        def feed() -> None:
            try:
                seconds = plan.warmup_s + plan.window_s
                produced.update(produce_paced(feed_settings, plan.rooms, plan.rate, seconds, name, ACCOUNTS))
            except BaseException as exc:  # noqa: BLE001 - handed to the measuring thread, which raises it
                failure.append(exc)

        def backlog() -> int:
            """Messages offered so far (the producer is paced) less the worker group's committed offsets."""
            return int((time.monotonic() - fed_at) * plan.rate) - committed_total(settings, line.group)

        feeder = threading.Thread(target=feed, name="feed", daemon=True)
        fed_at = time.monotonic()
        feeder.start()
        time.sleep(plan.warmup_s)
        start_ms, cpu0, counters0, backlog0 = now_ms(), cpu(), metrics.snapshot(), backlog()
        time.sleep(plan.window_s)
        end_ms, cpu1, counters1, backlog1 = now_ms(), cpu(), metrics.snapshot(), backlog()
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
    used["broker_less_jit"] = used["broker"] - used["broker_jit"]
    idle["broker_less_jit"] = idle["broker"] - idle["broker_jit"]
    idle_cores = {k: v / idle_s for k, v in idle.items()}
    roles = {
        "messages": settings.topic_messages,
        "acks": settings.topic_acks,
        "events": settings.topic_events,
        "dlq": settings.topic_dlq,
        "statuses": settings.topic_statuses,
    }
    latency = figures.latencies(events, receipts, start_ms, end_ms, partition_turns=False)
    return {
        "variant": variant.name,
        "partitions": variant.partitions,
        "env": {"common": variant.common, "worker": variant.worker, "webhook": variant.webhook_env()},
        "rate_msgs_per_s": plan.rate,
        "load_average": {"start": [round(v, 2) for v in load_start], "end": [round(v, 2) for v in load_end]},
        "window_s": round(window_s, 2),
        "produced": total,
        "delivered_in_window": delivered,
        "delivered_msgs_per_s": round(delivered / window_s, 1),
        "backlog": {
            "start": backlog0,
            "end": backlog1,
            "growth_share": round((backlog1 - backlog0) / max(1.0, plan.rate * window_s), 4),
        },
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


def sustained(run: dict[str, Any]) -> bool:
    """Whether the run's backlog grew by at most ``BACKLOG_GROWTH_MAX`` of the messages offered over its window."""
    return "error" not in run and float(run["backlog"]["growth_share"]) <= BACKLOG_GROWTH_MAX


def sustainable_rate(
    kafka: LocalKafka, pg: LocalPostgres, metrics: BrokerMetrics, plan: Plan, tag: str
) -> dict[str, Any]:
    """The highest of ``SEARCH_FACTORS`` times the plan's rate whose backlog does not grow over a short window, with
    the baseline (the first rate failing ends the search; when even the plan's rate fails, halves of it are tried)."""
    tried: list[dict[str, Any]] = []
    best: float | None = None

    def probe(rate: float) -> bool:
        short = Plan(rate, plan.rooms, 1, SEARCH_WARMUP_S, SEARCH_WINDOW_S)
        print(f"-- sustainable rate: {rate:.0f} msg/s", flush=True)
        try:
            run = measure(kafka, pg, metrics, short, BASELINE, f"search{int(rate)}-{tag}")
        except Exception as exc:  # noqa: BLE001 - a rate the box cannot carry may fail; it is then not sustained
            run = {"error": repr(exc)}
        ok = sustained(run)
        tried.append(
            {
                "rate": rate,
                "sustained": ok,
                "backlog": run.get("backlog"),
                "delivered_msgs_per_s": run.get("delivered_msgs_per_s"),
                "error": run.get("error"),
            }
        )
        return ok

    for factor in SEARCH_FACTORS:
        if not probe(plan.rate * factor):
            break
        best = plan.rate * factor
    if best is None:
        for factor in (0.5, 0.25):
            if probe(plan.rate * factor):
                best = plan.rate * factor
                break
    return {
        "rate": best,
        "tried": tried,
        "window_s": SEARCH_WINDOW_S,
        "backlog_growth_max": BACKLOG_GROWTH_MAX,
    }


def publish_paced(topic: str, rooms: int, rate: float, seconds: float, prefix: str) -> int:
    """The pipeline's messages (``ACCOUNTS`` accounts) published to the Pub/Sub ``topic`` at ``rate`` per second for
    ``seconds``, ordering key = room; how many."""
    publisher = pubsub_v1.PublisherClient(
        publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
    )
    filler = "x" * PAYLOAD_BYTES
    futures = []
    n = 0
    t0 = time.monotonic()
    try:
        while (elapsed := time.monotonic() - t0) < seconds:
            while n < int(elapsed * rate):
                r = n % rooms
                account = f"{PHONE_NUMBER_ID}{r % ACCOUNTS:03d}"
                room, _, value = message_value(prefix, r, n // rooms, filler, account=account)
                futures.append(publisher.publish(topic, value, ordering_key=room))
                n += 1
            time.sleep(0.005)
        for future in futures:
            future.result(120)
    finally:
        publisher.stop()
    return n


def bridge_stage(kafka: LocalKafka, pg: LocalPostgres, plan: Plan, tag: str) -> dict[str, Any]:
    """The bridge's CPU per message it wrote to Kafka, at ``plan.rate``: the emulator, one pull-mode bridge process,
    a paced publisher (module docstring: why not in front of every variant). The emulator's CPU is stated apart."""
    name = f"pipe-bridge-{tag}"
    settings = fresh_topics(kafka.bootstrap, name, BASELINE.partitions)
    workdir = Path(tempfile.mkdtemp(prefix=f"inturn-bench-{name}-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, True)
        pubsub = stack.enter_context(LocalPubSub())
        emulator = pubsub.pid
        if emulator is None:
            raise RuntimeError("the Pub/Sub emulator is not running")
        stack.enter_context(_environ("PUBSUB_EMULATOR_HOST", pubsub.host))
        subscription = f"{name}-sub"
        ensure(PUBSUB_PROJECT, name, subscription)
        line = Pipeline(settings, pg.dsn, workdir, group=f"bench-{name}")
        stack.callback(line.stop)
        bridge = line.start_bridge(pubsub.host, PUBSUB_PROJECT, subscription)

        def cpu() -> dict[str, float]:
            return {"bridge": proc_cpu_s(bridge.pid), "emulator": group_cpu_s(emulator)}

        time.sleep(1.0)
        idle0, t0 = cpu(), time.monotonic()
        time.sleep(plan.idle_s)
        idle = cpu_delta(idle0, cpu())
        idle_s = time.monotonic() - t0
        published: list[int] = []
        failure: list[BaseException] = []
        topic = pubsub_v1.PublisherClient.topic_path(PUBSUB_PROJECT, name)

        def feed() -> None:
            try:
                published.append(publish_paced(topic, plan.rooms, plan.rate, plan.warmup_s + plan.window_s, name))
            except BaseException as exc:  # noqa: BLE001 - handed to the measuring thread, which raises it
                failure.append(exc)

        feeder = threading.Thread(target=feed, name="publish", daemon=True)
        feeder.start()
        time.sleep(plan.warmup_s)
        t1, cpu0, written0 = time.monotonic(), cpu(), messages_written(settings)
        time.sleep(plan.window_s)
        t2, cpu1, written1 = time.monotonic(), cpu(), messages_written(settings)
        feeder.join(180)
        if failure:
            raise failure[0]
    written, window_s = written1 - written0, t2 - t1
    if not written:
        raise RuntimeError(f"{name}: the bridge wrote nothing in the window")
    used = cpu_delta(cpu0, cpu1)
    idle_cores = {k: v / idle_s for k, v in idle.items()}
    return {
        "rate_msgs_per_s": plan.rate,
        "window_s": round(window_s, 2),
        "published": published[0] if published else None,
        "written_in_window": written,
        "written_msgs_per_s": round(written / window_s, 1),
        "idle_cores": {k: round(v, 4) for k, v in idle_cores.items()},
        "cpu_us_per_message": {k: round(v / written * 1e6, 1) for k, v in used.items()},
        "cpu_us_per_message_less_idle": {
            k: round(max(0.0, v - idle_cores[k] * window_s) / written * 1e6, 1) for k, v in used.items()
        },
    }


@contextlib.contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    """``name`` set to ``value`` in this process's environment meanwhile (the Pub/Sub client reads it)."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def compare(run: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """A variant against the baseline of the same round: CPU ratios, latency differences, the issue's bounds."""

    def ratio(component: str) -> float | None:
        b = baseline["cpu_us_per_message"][component]
        return round(run["cpu_us_per_message"][component] / b, 3) if b else None

    def p99_delta(which: str) -> float | None:
        a, b = run["latency_ms"][which]["p99"], baseline["latency_ms"][which]["p99"]
        return None if a is None or b is None else round(a - b, 1)

    ratios = {c: ratio(c) for c in (*COMPONENTS, "broker_less_jit") if c in baseline["cpu_us_per_message"]}
    deltas = {"turn_to_sent_p99_ms": p99_delta("turn_to_sent"), "ack_p99_ms": p99_delta("ack")}
    broker, worker, webhook = ratios["broker"], ratios["worker"], ratios["webhook"]
    return {
        "cpu_ratio": ratios,
        "p99_delta": deltas,
        "broker_at_most_half": broker is not None and broker <= 0.5,
        "broker_less_jit_at_most_half": (ratios.get("broker_less_jit") or 1.0) <= 0.5,
        "latency_within_10ms": all(d is not None and d <= 10 for d in deltas.values()),
        "worker_webhook_not_above": worker is not None and worker <= 1 and webhook is not None and webhook <= 1,
    }


def rounds_at(
    kafka: LocalKafka, pg: LocalPostgres, metrics: BrokerMetrics, plan: Plan, names: list[str], repeats: int, tag: str
) -> list[dict[str, Any]]:
    """``repeats`` rounds of every variant of ``names`` (the baseline first) at ``plan``, each compared with the
    baseline of its round."""
    rounds: list[dict[str, Any]] = []
    for r in range(repeats):
        runs: dict[str, Any] = {}
        for n in names:
            print(f"-- {plan.rate:.0f} msg/s, round {r + 1}: {n}", flush=True)
            try:
                runs[n] = measure(kafka, pg, metrics, plan, VARIANTS[n], f"{n}-{r}-{tag}")
            except Exception as exc:  # noqa: BLE001 - one failed variant must not hide the others
                print(f"variant {n} failed: {exc!r}", file=sys.stderr, flush=True)
                runs[n] = {"variant": n, "error": repr(exc)}
        base = runs.get("baseline", {})
        for n, result in runs.items():
            if n != "baseline" and "error" not in result and "error" not in base:
                result["vs_baseline"] = compare(result, base)
        rounds.append(runs)
    return rounds


def bench(
    plan: Plan,
    names: list[str],
    repeats: int,
    *,
    sustainable: bool = True,
    sustainable_names: list[str] | None = None,
    sustainable_repeats: int | None = None,
    bridge: bool = True,
) -> dict[str, Any]:
    """Every variant of ``names`` (the baseline first in each round), ``repeats`` rounds at the plan's rate; then,
    with ``sustainable``, those of ``sustainable_names`` (default: the same) at the box's sustainable rate (searched
    first), ``sustainable_repeats`` rounds (default: ``repeats``); with ``bridge``, the bridge's stage at the plan's
    rate."""
    names = ["baseline", *(n for n in names if n != "baseline")]
    at_sustainable = ["baseline", *(n for n in (sustainable_names or names) if n != "baseline")]
    started = time.time()
    code = code_version()
    out: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        # A loaded box (load average 30 on 2 cores) took more than the launcher's default minute to start Kafka.
        kafka = LocalKafka(heap_mb=768, jmx=True)
        stack.callback(kafka.cleanup)
        kafka.start(timeout=300)
        pg = stack.enter_context(LocalPostgres())
        metrics = BrokerMetrics(kafka)
        try:
            metrics.snapshot()  # the helper's start-up (a JVM) before any window
            # The broker's JIT compiles its produce and fetch paths over its first minutes of traffic: a run of the
            # baseline, not counted, so that the first variant measured pays less for it (10 s left the compiler
            # threads at up to half a core through the first window: ``JIT_THREADS``).
            warm = Plan(plan.rate, plan.rooms, 1, 3, WARM_S)
            print("-- warm-up (not counted)", flush=True)
            with contextlib.suppress(Exception):
                measure(kafka, pg, metrics, warm, BASELINE, f"warmup-{int(started)}")
            out["rounds"] = rounds_at(kafka, pg, metrics, plan, names, repeats, str(int(started)))
            if sustainable:
                search = sustainable_rate(kafka, pg, metrics, plan, str(int(started)))
                out["sustainable"] = search
                if search["rate"] is not None:
                    at = Plan(search["rate"], plan.rooms, plan.idle_s, plan.warmup_s, plan.window_s)
                    again = repeats if sustainable_repeats is None else sustainable_repeats
                    search["rounds"] = rounds_at(kafka, pg, metrics, at, at_sustainable, again, f"s{int(started)}")
            if bridge:
                print("-- bridge stage", flush=True)
                try:
                    out["bridge"] = bridge_stage(kafka, pg, plan, str(int(started)))
                except Exception as exc:  # noqa: BLE001 - the variants' figures stand without it
                    print(f"bridge stage failed: {exc!r}", file=sys.stderr, flush=True)
                    out["bridge"] = {"error": repr(exc)}
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
            "accounts": ACCOUNTS,
            "idle_s": plan.idle_s,
            "warmup_s": plan.warmup_s,
            "broker_warmup_s": WARM_S,
            "window_s": plan.window_s,
            "payload_bytes": PAYLOAD_BYTES,
            "lost_share": LOST_SHARE,
            "ack_timeout_ms": ACK_TIMEOUT_MS,
            "statuses": ["sent", "delivered", "read"],
            "statuses_per_callback": 1,
            "workers": 1,
        },
        "variants": {n: _describe(VARIANTS[n]) for n in dict.fromkeys([*names, *at_sustainable])},
        **out,
    }


def _describe(v: Variant) -> dict[str, Any]:
    return {"partitions": v.partitions, "common": v.common, "worker": v.worker, "webhook": v.webhook_env()}


#: What ``make bench`` runs against the baseline: today's defaults on topics sized for the rate, the statuses split
#: off (``sized``: 2 partitions of messages and acks, one of events), that with the split on as by default
#: (``sizedsplit``), and ``sized`` on 4 partitions (``sized4``). The others stay in ``VARIANTS`` for ``--variants``
#: (each sets its settings beside today's defaults): each costs a minute and a half of a quiet box.
RUN_VARIANTS = ["sized", "sizedsplit", "sized4"]
#: Rounds of every variant at the stated rate (their spread is the noise a ratio is read against).
RUN_REPEATS = 2
#: What the second run, at the box's sustainable rate, measures against the baseline (one round).
SUSTAINABLE_VARIANTS = ["sized", "sizedsplit"]


def run(quick: bool) -> dict[str, Any]:
    """The baseline against the candidates at the stated rate, then at the sustainable rate, and the bridge's stage
    (quick: a smaller plan, no sustainable-rate search)."""
    if quick:
        return bench(QUICK, RUN_VARIANTS, 1, sustainable=False)
    return bench(FULL, RUN_VARIANTS, RUN_REPEATS, sustainable_names=SUSTAINABLE_VARIANTS, sustainable_repeats=1)


def main(argv: list[str] | None = None) -> int:
    """Chosen variants, for development: ``python -m benchmarks.bench_pipeline --variants fetch partitions3``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pipeline", description=__doc__)
    parser.add_argument("--variants", nargs="+", default=RUN_VARIANTS, choices=sorted(VARIANTS))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--rate", type=float)
    parser.add_argument("--window", type=float)
    parser.add_argument("--quick", action="store_true", help="a smaller plan; no sustainable-rate search")
    parser.add_argument("--no-bridge", action="store_true", help="leave out the bridge's stage")
    parser.add_argument("--no-sustainable", action="store_true", help="leave out the sustainable-rate run")
    parser.add_argument("--out", type=Path, default=Path("var/bench/pipeline-dev.json"))
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.rate or args.window:
        plan = Plan(args.rate or plan.rate, plan.rooms, plan.idle_s, plan.warmup_s, args.window or plan.window_s)
    sustainable = not (args.quick or args.no_sustainable)
    result = bench(plan, args.variants, args.repeats, sustainable=sustainable, bridge=not args.no_bridge)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
