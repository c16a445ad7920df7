"""Counters and histograms for a per-message path, updated without a lock and read at scrape time.

prometheus_client guards every value with a lock: about a microsecond per ``inc`` and two per
``observe``, and the worker updates five such metrics per message. These families keep plain
numbers instead. They are correct when every update comes from one thread, which is how the worker
uses them (its event loop's thread; ``/metrics`` is served on the same loop); updates from several
threads could lose increments. They export the same text format as prometheus_client's own.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


class CounterChild:
    """One label combination of a ``LockFreeCounter``."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (not negative)."""
        if amount < 0:
            raise ValueError("counters only go up")
        self.value += amount


class HistogramChild:
    """One label combination of a ``LockFreeHistogram``."""

    __slots__ = ("_upper", "counts", "sum")

    def __init__(self, upper: tuple[float, ...]) -> None:
        self._upper = upper
        self.counts = [0] * len(upper)  # per bucket, not cumulative; the last bucket is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Count ``value`` in the first bucket whose upper bound is at least ``value``."""
        self.counts[bisect.bisect_left(self._upper, value)] += 1
        self.sum += value


C = TypeVar("C", CounterChild, HistogramChild)


class _Family(Collector, Generic[C]):
    """A labelled family of ``C`` children, registered with ``registry``; subclasses say how to make a child
    and how to export the family."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry | None):
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], C] = {}
        if registry is not None:
            registry.register(self)

    def labels(self, *values: str) -> C:
        """The child of these label values (created on first use)."""
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
        key = tuple(str(v) for v in values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._new_child()
        return child

    def describe(self) -> list[Metric]:
        """The family without samples (what the registry checks names against)."""
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        """The family with every child's samples."""
        family = self._family()
        for key, child in list(self._children.items()):
            self._add(family, list(key), child)
        yield family

    def _new_child(self) -> C:
        raise NotImplementedError

    def _family(self) -> Metric:
        raise NotImplementedError

    def _add(self, family: Metric, labels: list[str], child: C) -> None:
        raise NotImplementedError


class LockFreeCounter(_Family[CounterChild]):
    """A labelled counter; ``name`` without the ``_total`` suffix (it is added on export)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        registry: CollectorRegistry | None = REGISTRY,
    ) -> None:
        super().__init__(name, documentation, labelnames, registry)

    def _new_child(self) -> CounterChild:
        return CounterChild()

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add(self, family: Metric, labels: list[str], child: CounterChild) -> None:
        assert isinstance(family, CounterMetricFamily)
        family.add_metric(labels, child.value)


class LockFreeHistogram(_Family[HistogramChild]):
    """A labelled histogram with fixed buckets (+Inf is added)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = (),
        registry: CollectorRegistry | None = REGISTRY,
    ) -> None:
        upper = sorted(float(b) for b in buckets)
        if not upper or upper[-1] != math.inf:
            upper.append(math.inf)
        self._upper = tuple(upper)
        super().__init__(name, documentation, labelnames, registry)

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self._upper)

    def _family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add(self, family: Metric, labels: list[str], child: HistogramChild) -> None:
        """Cumulative buckets, count and sum."""
        assert isinstance(family, HistogramMetricFamily)
        counts, total = list(child.counts), child.sum
        cumulative, buckets = 0, []
        for upper, count in zip(self._upper, counts, strict=True):
            cumulative += count
            buckets.append((floatToGoString(upper), cumulative))  # type: ignore[no-untyped-call]  # prometheus_client leaves it untyped
        family.add_metric(labels, buckets, total)
