"""The platform simulator's Prometheus metrics, read from its counters at scrape time.

The simulator counts with plain integers (its hot path stays cheap, and ``POST /_sim/reset`` can
clear them); this collector turns a snapshot of them into ``inturn_sim_*`` metrics. Each simulator
gets its own registry, so several can run in one process (tests) without name clashes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# Counter names (exported with a ``_total`` suffix) -> (stats key, help).
COUNTERS: dict[str, tuple[str, str]] = {
    "inturn_sim_messages_accepted": ("accepted", "Sends answered 200."),
    "inturn_sim_deliveries": ("deliveries", "Messages that reached a recipient's device (receipts)."),
    "inturn_sim_duplicates": ("duplicates", "Deliveries of a (room_id, message_id) delivered before."),
    "inturn_sim_messages_failed": ("failed_messages", "Accepted messages that got a 'failed' status instead."),
    "inturn_sim_callbacks_dropped": ("callbacks_dropped", "Messages whose status callbacks were all dropped."),
    "inturn_sim_callback_requests": ("callback_requests", "Callback requests the webhook answered 2xx."),
    "inturn_sim_callback_retries": ("callback_retries", "Callback requests retried after non-2xx or no answer."),
    "inturn_sim_callbacks_failed": ("callbacks_failed", "Statuses given up after the last retry."),
    "inturn_sim_callbacks_duplicated": ("callbacks_duplicated", "Statuses called back a second time, later."),
    "inturn_sim_callbacks_delayed": ("callbacks_delayed", "Statuses held back by the callback delay knob."),
    "inturn_sim_callbacks_unsent": ("callbacks_unsent", "Statuses not sent because no webhook URL is set."),
}
GAUGES: dict[str, tuple[str, str]] = {
    "inturn_sim_pending_deliveries": ("pending", "Accepted messages not yet at the device."),
    "inturn_sim_withheld_callbacks": ("withheld", "Statuses held back for withheld recipients."),
}
REJECTED = "inturn_sim_requests_rejected"  # labels: status
CALLBACKS_SENT = "inturn_sim_callbacks_sent"  # labels: status (sent, delivered, read, failed)


class SimCollector(Collector):
    """Exports a simulator's counters; ``snapshot`` returns them as ``Stats.snapshot()`` does."""

    def __init__(self, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        """One metric family per counter and gauge."""
        stats = self._snapshot()
        for name, (key, help_text) in COUNTERS.items():
            yield CounterMetricFamily(name, help_text, value=stats[key])
        for name, (key, help_text) in GAUGES.items():
            yield GaugeMetricFamily(name, help_text, value=stats[key])
        rejected = CounterMetricFamily(REJECTED, "Sends answered with an error, by HTTP status.", labels=["status"])
        for status, count in sorted(stats["rejected"].items()):
            rejected.add_metric([str(status)], count)
        yield rejected
        sent = CounterMetricFamily(CALLBACKS_SENT, "Statuses delivered to the webhook (2xx).", labels=["status"])
        for status, count in sorted(stats["callbacks_by_status"].items()):
            sent.add_metric([status], count)
        yield sent


def registry_for(snapshot: Callable[[], Mapping[str, Any]]) -> CollectorRegistry:
    """A registry of its own holding one simulator's metrics."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(SimCollector(snapshot))
    return registry
