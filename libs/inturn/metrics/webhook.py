"""Prometheus metrics of the ack webhook (``inturn_webhook_*``).

Each uvicorn worker process counts for itself; scrape one process per pod (workers=1) or every port. The three
updated for every callback are lock-free (``inturn.metrics.lockfree``): the webhook updates them, and serves
``/metrics``, on its event loop's thread only.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from inturn.metrics.lockfree import LockFreeCounter, LockFreeHistogram

#: Requests by endpoint and answer: ok, bad_signature, too_large, kafka_timeout, dead_lettered, forbidden.
REQUESTS = LockFreeCounter(
    "inturn_webhook_requests",
    "Webhook requests by endpoint and outcome.",
    ["endpoint", "outcome"],
)

#: Statuses by platform, status and outcome: published, replayed, unknown_room, invalid.
STATUSES = LockFreeCounter(
    "inturn_webhook_statuses",
    "Platform statuses received, by outcome.",
    ["platform", "status", "outcome"],
)

#: Changes that are not statuses (incoming messages, other fields), acknowledged and ignored.
IGNORED_CHANGES = Counter(
    "inturn_webhook_ignored_changes_total",
    "Webhook changes acknowledged without producing an ack (incoming messages, other fields).",
    ["platform", "kind"],
)

#: Records written to the dead-letter topic, by reason: unreadable_body, invalid_status, unknown_room.
DEAD_LETTERS = Counter(
    "inturn_webhook_dead_letters_total",
    "Records the webhook put on the dead-letter topic, by reason.",
    ["reason"],
)

#: Time from producing a request's records to Kafka confirming all of them.
KAFKA_CONFIRM_SECONDS = LockFreeHistogram(
    "inturn_webhook_kafka_confirm_seconds",
    "Seconds until Kafka confirmed every record of a request.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

#: 1 while Kafka answered within the readiness window.
KAFKA_REACHABLE = Gauge(
    "inturn_webhook_kafka_reachable",
    "1 when Kafka answered recently (what /readyz reports), else 0.",
)
