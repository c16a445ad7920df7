"""The worker at half load: its own delay from a message's turn to its send, when messages arrive at half the rate
the box sustains.

1. The rate the box sustains: one worker in ack mode under a standing backlog, measured as the scenario matrix
   measures a mode (``bench_matrix.measure_mode``), with the matrix's platform latency and every ack delivered. The
   raw HTTP loop (``bench_matrix.raw_loop``) is measured too, for reference only: its burst of bare POSTs ends before
   the callbacks it causes are served (on a quiet box it reached 4,606 msg/s, and half of that queued a worker's
   pipeline for seconds).
2. A worker in ack mode on fresh topics, and a producer writing messages at half the sustained rate, rooms in turn,
   for a warm-up and a window; then the producer stops and the worker finishes what it consumed.
3. From the worker's own events (never its counters), for every message sent in the window: its turn came at the
   later of its ``consumed_at_ms`` and the ``ts_ms`` of the terminal event of the room's previous message, and
   ended at its ``sent_at_ms`` (``matrix_figures.turn_delays``, reading both the old two-event and the new
   one-event shape). The receipt log gives the delivered rate and the checker's verdict.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks import code_version, fresh_topics, producing
from benchmarks import matrix_figures as figures
from benchmarks.bench_matrix import (
    PARTITIONS,
    PAYLOAD_BYTES,
    Plan,
    high_watermark_for,
    measure_mode,
    produce_backlog,
    raw_loop,
    read_events,
    sim_env_for,
    worker_env_for,
)
from inturn.kafka import committed_total
from inturn.schemas import now_ms
from inturn.settings import KafkaSettings
from inturn_devtools import LocalKafka, LocalPostgres
from inturn_devtools.pipeline import PHONE_NUMBER_ID, Pipeline, message_value
from inturn_devtools.receipts import check
from inturn_devtools.waiting import wait_until

TARGET_P99_MS = 50
SHARE = 0.5  # of the rate the pipeline sustains (``capacity``)
CAPACITY_BACKLOG = 100_000  # messages behind the capacity run's window, more than this box sends in it (60,000 ran out)


def produce_paced(
    settings: KafkaSettings, rooms: int, rate: float, seconds: float, prefix: str, accounts: int = 1
) -> dict[str, list[str]]:
    """Messages to the messages topic at ``rate`` per second for ``seconds``, rooms in turn; each room's order.
    ``accounts``: the rooms spread over that many WhatsApp sending accounts (room r: account r mod ``accounts``)."""
    produced: dict[str, list[str]] = {}
    with producing(settings, 60, "every message") as producer:
        for room, message_id, value in paced(rooms, rate, seconds, prefix, accounts, lambda: producer.poll(0)):
            producer.produce(settings.topic_messages, key=room, value=value)
            produced.setdefault(room, []).append(message_id)
    return produced


def paced(
    rooms: int, rate: float, seconds: float, prefix: str, accounts: int, between: Callable[[], object]
) -> Iterator[tuple[str, str, bytes]]:
    """The benchmark's messages (room, message id, value) at ``rate`` per second for ``seconds``, rooms in turn,
    spread over ``accounts`` sending accounts (one: the default account); ``between`` runs after each burst."""
    filler = "x" * PAYLOAD_BYTES
    n = 0
    t0 = time.monotonic()
    while (elapsed := time.monotonic() - t0) < seconds:
        while n < int(elapsed * rate):
            r = n % rooms
            account = f"{PHONE_NUMBER_ID}{r % accounts:03d}" if accounts > 1 else None
            yield message_value(prefix, r, n // rooms, filler, account=account)
            n += 1
        between()
        time.sleep(0.005)


def capacity(kafka: LocalKafka, pg: LocalPostgres, name: str, rooms: int, window_s: float) -> dict[str, Any]:
    """The rate the whole pipeline sustains on this box: one worker in ack mode under a standing backlog (the matrix's
    measurement of a mode: sends the simulator accepted in a window after a warm-up), with the same simulator,
    webhook and Kafka as the half-load run. The raw HTTP loop is no measure of that: a burst of bare POSTs ends
    before the callbacks it causes are served, and no Kafka or worker shares the box with it."""
    plan = Plan(rooms=(rooms,), backlog=0, raw_requests=0, warmup_s=5, window_s=window_s)
    per_room = max(2, math.ceil(CAPACITY_BACKLOG / rooms))
    settings = fresh_topics(kafka.bootstrap, f"{name}-capacity", PARTITIONS)
    produced = produce_backlog([settings], rooms, per_room, prefix=f"{name}-capacity")
    high = high_watermark_for(rooms)
    measured = measure_mode(pg, settings, plan, f"{name}-capacity", "ack", sim_env_for(1.0), produced, high)
    return {key: measured[key] for key in ("msgs_per_s", "window_s", "delivered_in_window", "backlog_left_at_end")}


def scenario(kafka: LocalKafka, pg: LocalPostgres, rooms: int, warmup_s: float, window_s: float) -> dict[str, Any]:
    """One half-load run of ``rooms`` rooms."""
    name = f"half-r{rooms}"
    sim_env = sim_env_for(1.0)
    raw = raw_loop(kafka, f"{name}-raw", rooms, max(5000, 2 * rooms), sim_env)  # for reference
    sustained = capacity(kafka, pg, name, rooms, window_s / 2)
    rate = sustained["msgs_per_s"] * SHARE
    settings = fresh_topics(kafka.bootstrap, name, PARTITIONS)
    worker_env = worker_env_for("ack")
    workdir = Path(tempfile.mkdtemp(prefix=f"inturn-bench-{name}-"))
    with Pipeline(settings, pg.dsn, workdir, group=f"bench-{name}", sim=sim_env, worker=worker_env) as line:
        worker = line.start("w1").workers["w1"]
        start_ms = now_ms() + int(warmup_s * 1000)
        cpu0 = worker.cpu_seconds()
        produced = produce_paced(settings, rooms, rate, warmup_s + window_s, name)
        end_ms = now_ms()
        cpu = worker.cpu_seconds() - cpu0
        total = sum(len(ids) for ids in produced.values())
        with contextlib.suppress(TimeoutError):  # the figures then show what was not delivered
            wait_until(
                lambda: committed_total(settings, line.group) >= total, 120, "every message committed", every=0.5
            )
        events = read_events(settings)
        receipts = line.receipts()
    shutil.rmtree(workdir, ignore_errors=True)
    consumed_to_sent, turn_to_sent = figures.turn_delays(events, start_ms, end_ms)
    delivered = figures.accepted_in(receipts, start_ms, end_ms)
    window = (end_ms - start_ms) / 1000
    return {
        "rooms": rooms,
        "raw": raw,
        "capacity": sustained,
        "rate_offered_msgs_per_s": round(rate, 1),
        "produced": total,
        "delivered_in_window": delivered,
        "delivered_msgs_per_s": round(delivered / window, 1),
        "window_s": round(window, 1),
        "worker_cpu_s_per_s": round(cpu / ((end_ms - start_ms) / 1000 + warmup_s), 3),
        "turn_to_sent_ms": figures.spread(turn_to_sent),
        "consumed_to_sent_ms": figures.spread(consumed_to_sent),
        "receipts": figures.verdict(check(receipts, produced), produced, receipts),
    }


def run(quick: bool) -> dict[str, Any]:
    """The half-load scenario (1,000 rooms quick, 5,000 full)."""
    rooms, warmup_s, window_s = (1000, 5.0, 15.0) if quick else (5000, 10.0, 30.0)
    code = code_version()
    with LocalKafka(heap_mb=768) as kafka, LocalPostgres() as pg:
        result = scenario(kafka, pg, rooms, warmup_s, window_s)
    return {**result, "share_of_capacity": SHARE, "target_turn_to_sent_p99_ms": TARGET_P99_MS, "code": code}
