"""Benchmarks (``make bench``): each module ``bench_<area>.py`` has ``run(quick: bool) -> dict``.

Results are ratios against a baseline measured in the same run, because this machine is noisy;
``benchmarks.run`` writes them to ``var/bench/results.json``.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from inturn import topics
from inturn.kafka import make_admin
from inturn.settings import KafkaSettings


def fresh_topics(bootstrap: str, name: str, partitions: int) -> KafkaSettings:
    """A benchmark's own four topics ``<name>.*`` of ``partitions`` partitions, created."""
    settings = KafkaSettings(kafka_bootstrap=bootstrap, topic_partitions=partitions, **topics.prefixed(name))
    topics.create(make_admin(settings), settings)
    return settings


def code_version() -> dict[str, Any]:
    """The commit a run measured and the source files changed since (``INTURN_BENCH_COMMIT`` outside git)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "libs", "services", "cli", "benchmarks"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"commit": os.environ.get("INTURN_BENCH_COMMIT"), "modified": []}
    return {"commit": commit.strip(), "modified": [line[3:] for line in status.splitlines()]}
