"""The lock-free metric families export exactly what prometheus_client's own would."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from inturn.metrics.lockfree import LockFreeCounter, LockFreeHistogram

BUCKETS = (0.005, 0.01, 0.025, 0.1, 1, 10)
VALUES = (0.0, 0.005, 0.0051, 0.01, 0.3, 1.0, 9.99, 10.0, 10.5, 1e6, 0.007)


def _samples(registry: CollectorRegistry) -> list[str]:
    """Exposition lines without the ``_created`` samples (prometheus_client's own families add those)."""
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if "_created" not in line]


def test_a_histogram_exports_the_same_buckets_count_and_sum_as_prometheus_client() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("t_seconds", "Help.", ["platform"], buckets=BUCKETS, registry=theirs)
    candidate = LockFreeHistogram("t_seconds", "Help.", ["platform"], buckets=BUCKETS, registry=ours)
    for platform in ("a", "b"):
        for value in VALUES if platform == "a" else VALUES[:3]:
            reference.labels(platform).observe(value)
            candidate.labels(platform).observe(value)
    assert _samples(ours) == _samples(theirs)
    assert 't_seconds_bucket{le="0.005",platform="a"} 2.0' in _samples(ours)  # a bound counts as inside


def test_a_counter_exports_the_same_total_as_prometheus_client() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Counter("t_sends_total", "Help.", ["platform"], registry=theirs)
    candidate = LockFreeCounter("t_sends", "Help.", ["platform"], registry=ours)
    for platform, amount in (("a", 1), ("a", 2.5), ("b", 1), ("a", 1)):
        reference.labels(platform).inc(amount)
        candidate.labels(platform).inc(amount)
    assert _samples(ours) == _samples(theirs)
    assert 't_sends_total{platform="a"} 4.5' in _samples(ours)


def test_wrong_labels_and_negative_increments_are_refused() -> None:
    counter = LockFreeCounter("t_refused", "Help.", ["platform"], registry=CollectorRegistry())
    with pytest.raises(ValueError, match="expected labels"):
        counter.labels("a", "b")
    with pytest.raises(ValueError, match="only go up"):
        counter.labels("a").inc(-1)


def test_a_name_taken_in_the_registry_is_refused() -> None:
    registry = CollectorRegistry()
    Counter("t_taken_total", "Help.", registry=registry)
    with pytest.raises(ValueError, match="Duplicated"):
        LockFreeCounter("t_taken", "Help.", registry=registry)
