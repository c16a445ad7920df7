"""Benchmarks (``make bench``): each module ``bench_<area>.py`` has ``run(quick: bool) -> dict``.

Results are ratios against a baseline measured in the same run, because this machine is noisy;
``benchmarks.run`` writes them to ``var/bench/results.json``.
"""

from __future__ import annotations

from inturn import topics
from inturn.kafka import make_admin
from inturn.settings import KafkaSettings


def fresh_topics(bootstrap: str, name: str, partitions: int) -> KafkaSettings:
    """A benchmark's own four topics ``<name>.*`` of ``partitions`` partitions, created."""
    settings = KafkaSettings(kafka_bootstrap=bootstrap, topic_partitions=partitions, **topics.prefixed(name))
    topics.create(make_admin(settings), settings)
    return settings
