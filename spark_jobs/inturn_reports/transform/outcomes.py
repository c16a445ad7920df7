"""What the report counts of each message: its yes/no outcomes, and its latencies by measure."""

from __future__ import annotations

#: Every yes/no a table counts, by the name of its count in the tables (``arrow_pass`` computes them in this order).
OUTCOMES = (
    "dispatched", "delivered", "acked", "ack_timeouts", "late_acks", "dead_letters", "skipped_duplicates",
    "sent_unacked", "duplicates", "failed", "no_device_ts", "pairs", "inverted", "dispatch_pairs",
    "dispatch_violations",
)  # fmt: skip
#: The latency measures, by their number in the pass's latency rows (``arrow_pass``: 0 ack, 1 e2e, 2 device).
MEASURES = ("ack", "e2e", "device")
#: Upper edges (inclusive, ms) of the latency histogram's buckets; the last bucket is open-ended (null edge).
LATENCY_EDGES_MS = (10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
