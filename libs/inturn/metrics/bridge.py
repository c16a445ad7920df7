"""Prometheus metrics of the Pub/Sub bridge (``inturn_bridge_*``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

#: One per Pub/Sub message handled, by how it ended. ``written``: on inturn.messages and acked;
#: ``duplicate``: a redelivery of a message already written (acked, not written again);
#: ``dead_lettered``: on inturn.dlq and acked; ``nacked``: not written, Pub/Sub delivers it again.
MESSAGES = Counter(
    "inturn_bridge_messages_total",
    "Pub/Sub messages handled by the bridge, by outcome.",
    ["mode", "outcome"],
)

#: Why messages were nacked: ``kafka_error`` (the write failed), ``room_busy`` (a message of the
#: room was still being written), ``room_blocked`` (waiting for an earlier failed message of the
#: room to come back), ``draining`` (the bridge is shutting down).
NACKS = Counter("inturn_bridge_nacks_total", "Pub/Sub messages nacked, by reason.", ["mode", "reason"])

DEAD_LETTERS = Counter("inturn_bridge_dead_letters_total", "Messages dead-lettered, by reason kind.", ["kind"])

IN_FLIGHT = Gauge("inturn_bridge_in_flight", "Writes to Kafka the bridge is waiting on.")

WRITE_SECONDS = Histogram(
    "inturn_bridge_write_seconds",
    "From receiving a Pub/Sub message to Kafka confirming its write.",
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)

PUSH_REQUESTS = Counter("inturn_bridge_push_requests_total", "Push requests answered, by HTTP status.", ["status"])
