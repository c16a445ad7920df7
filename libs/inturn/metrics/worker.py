"""The worker's Prometheus metrics (no per-room labels: rooms are unbounded, partitions and platforms are not)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Gauge

from inturn.metrics.lockfree import LockFreeCounter, LockFreeHistogram

CONSUMED = Counter("inturn_worker_consumed_total", "Messages consumed from the messages topic.", ["mode"])
# The metrics updated for every message are lock-free (see lockfree.py); all are updated on the event loop.
DISPATCHED = LockFreeCounter("inturn_worker_dispatched", "Sends the platform accepted.", ["platform"])
ACKED = LockFreeCounter("inturn_worker_acked", "Messages acked by the platform in time.", ["platform"])
ACK_TIMEOUTS = Counter("inturn_worker_ack_timeouts_total", "Messages whose ack did not come in time.", ["platform"])
LATE_ACKS = Counter("inturn_worker_late_acks_total", "Acks that arrived after their message timed out.", ["platform"])
DUPLICATE_ACKS = LockFreeCounter("inturn_worker_duplicate_acks", "Acks for messages already resolved.", ["platform"])
RETRIES = Counter("inturn_worker_retries_total", "Send attempts that failed transiently.", ["platform", "reason"])
DEAD_LETTERS = Counter("inturn_worker_dead_letters_total", "Messages dead-lettered.", ["platform", "reason"])
SKIPPED_DUPLICATES = Counter(
    "inturn_worker_skipped_duplicates_total",
    "Messages skipped as already done: the room cursor was past them, or their id was among the room's recent sends.",
)
MISROUTED = Counter(
    "inturn_worker_misrouted_messages_total",
    "Messages consumed from a partition other than murmur2(room_id): their producer used another partitioner "
    "(set partitioner=murmur2_random). Their acks still find this worker through the callback data.",
)
ACTIVE_ROOMS = Gauge("inturn_worker_active_rooms", "Rooms with a running sender loop.")
STUCK_ROOMS = Gauge(
    "inturn_worker_stuck_rooms", "Rooms whose head message has waited more than twice its platform's ack timeout."
)
BLOCKED_ROOMS = Gauge("inturn_worker_blocked_rooms", "Rooms stopped by the block policy until an operator acts.")
BUFFERED = Gauge("inturn_worker_buffered_messages", "Consumed messages not yet terminal.", ["partition"])
PAUSED_PARTITIONS = Gauge("inturn_worker_paused_partitions", "Partitions paused for backpressure.")
ASSIGNED_PARTITIONS = Gauge("inturn_worker_assigned_partitions", "Messages partitions this worker owns.")
COMMIT_LAG = Gauge(
    "inturn_worker_commit_lag_messages", "Consumed offsets not yet committable (not terminal).", ["partition"]
)
ACK_LATENCY = LockFreeHistogram(
    "inturn_worker_ack_latency_seconds",
    "From the send's return to its ack.",
    ["platform"],
    buckets=(0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30),
)
SEND_LATENCY = LockFreeHistogram(
    "inturn_worker_send_seconds",
    "Duration of one send attempt (HTTP).",
    ["platform"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
ACK_TIMEOUT_SECONDS = Gauge("inturn_worker_ack_timeout_seconds", "Ack timeout in force.", ["platform"])
CIRCUIT_OPEN = Gauge(
    "inturn_worker_circuit_open", "1 while a platform account's circuit breaker is open.", ["platform", "account"]
)
FENCED = Counter(
    "inturn_worker_fenced_total", "Partitions this worker stopped sending for after a newer owner's epoch was seen."
)
STORE_WENT_BACK = Counter(
    "inturn_worker_store_went_back_total",
    "Partitions whose epoch in PostgreSQL was found below the one this worker holds, or another owner's under the "
    "same number: the store went back in time (a restore, a replica behind).",
)
POSTGRES_UP = Gauge("inturn_worker_postgres_up", "1 when the last PostgreSQL operation succeeded.")
DRAINING = Gauge("inturn_worker_draining", "1 while the worker drains for shutdown.")


@dataclass(frozen=True, slots=True)
class PlatformMetrics:
    """The per-platform children of the metrics above, looked up once (``labels`` takes a lock each call)."""

    dispatched: Any
    acked: Any
    ack_timeouts: Any
    ack_latency: Any
    send_latency: Any
    ack_timeout_seconds: Any
    late_acks: Any
    duplicate_acks: Any


@functools.cache
def for_platform(platform: str) -> PlatformMetrics:
    """The metric children of ``platform`` (cached: platforms are few)."""
    return PlatformMetrics(
        DISPATCHED.labels(platform),
        ACKED.labels(platform),
        ACK_TIMEOUTS.labels(platform),
        ACK_LATENCY.labels(platform),
        SEND_LATENCY.labels(platform),
        ACK_TIMEOUT_SECONDS.labels(platform),
        LATE_ACKS.labels(platform),
        DUPLICATE_ACKS.labels(platform),
    )
