"""Benchmarks (``make bench``): each module ``bench_<area>.py`` has ``run(quick: bool) -> dict``.

Results are ratios against a baseline measured in the same run, because this machine is noisy;
``benchmarks.run`` writes them to ``var/bench/results.json``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Producer

from inturn import topics
from inturn.kafka import make_admin, make_producer
from inturn.settings import KafkaSettings


def fresh_topics(
    bootstrap: str, name: str, partitions: int, events_partitions: int = 0, statuses_partitions: int = 0
) -> KafkaSettings:
    """A benchmark's own topics ``<name>.*`` of ``partitions`` partitions, created; the events and statuses topics
    of their own counts where given (0: ``partitions``)."""
    settings = KafkaSettings(
        kafka_bootstrap=bootstrap,
        topic_partitions=partitions,
        topic_events_partitions=events_partitions,
        topic_statuses_partitions=statuses_partitions,
        **topics.prefixed(name),
    )
    topics.create(make_admin(settings), settings)
    return settings


@contextmanager
def producing(settings: KafkaSettings, flush_s: float, what: str) -> Iterator[Producer]:
    """A producer for a benchmark's input: at the block's end everything given to it must be on Kafka within
    ``flush_s`` (``RuntimeError`` naming ``what`` if not); closed however the block ends."""
    producer = make_producer(settings)
    try:
        yield producer
        if producer.flush(flush_s) != 0:
            raise RuntimeError(f"could not produce {what}")
    finally:
        producer.close()


#: What a benchmark's figures depend on: the code, and the launcher and image settings its processes run with.
MEASURED_PATHS = ("libs", "services", "cli", "devtools", "benchmarks", "Dockerfile")


def code_version() -> dict[str, Any]:
    """The commit a run measured and the source files changed since (``INTURN_BENCH_COMMIT`` outside git)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *MEASURED_PATHS],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"commit": os.environ.get("INTURN_BENCH_COMMIT"), "modified": []}
    return {"commit": commit.strip(), "modified": [line[3:] for line in status.splitlines()]}
