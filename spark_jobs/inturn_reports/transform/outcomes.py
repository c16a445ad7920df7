"""The message facts as the tables read them: a narrow row per message, its yes/no outcomes as bits of one int.

The job caches this form (on local disk, docs/reports.md) for every table to read, so it is as small as the
tables allow: the keys, the first event's time (timeline), retries, the two latencies, and ``outcome``, whose
bits say which of ``OUTCOMES`` the message had (a table counts them with ``count_of``).
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

#: Every yes/no a table counts, by the name of its count in the tables; its bit in ``outcome`` is its position.
OUTCOMES = (
    "dispatched", "delivered", "acked", "ack_timeouts", "late_acks", "dead_letters", "skipped_duplicates",
    "sent_unacked", "duplicates", "failed", "no_device_ts", "pairs", "inverted", "dispatch_pairs",
    "dispatch_violations",
)  # fmt: skip
#: The columns of the outcome form, in order.
OUTCOME_COLUMNS = (
    "date", "room_id", "platform", "mode", "first_ts_ms", "retries", "ack_latency_ms", "e2e_latency_ms", "outcome",
)  # fmt: skip


def _conditions() -> dict[str, Column]:
    """Each outcome as a condition on the message facts (null counts as no)."""
    conditions = {
        "dispatched": F.col("dispatches") > 0,
        "delivered": F.col("delivered"),
        "acked": F.col("acked"),
        "ack_timeouts": F.col("ack_timeout"),
        "late_acks": F.col("late_ack"),
        "dead_letters": F.col("dead_lettered"),
        "skipped_duplicates": F.col("skipped_duplicate"),
        "sent_unacked": F.col("sent"),
        "duplicates": F.col("dispatches") > 1,
        "failed": F.col("failed"),
        "no_device_ts": F.col("device_ts_ms").isNull(),
        "pairs": F.col("inverted").isNotNull(),
        "inverted": F.col("inverted"),
        "dispatch_pairs": F.col("dispatch_violation").isNotNull(),
        "dispatch_violations": F.col("dispatch_violation"),
    }
    assert tuple(conditions) == OUTCOMES  # the bit order is OUTCOMES'
    return conditions


def outcomes(facts: DataFrame) -> DataFrame:
    """``facts`` (``message_facts``) in the outcome form; a frame already in it is returned as it is."""
    if "outcome" in facts.columns:
        return facts
    bits = [F.when(cond, F.lit(1 << i)).otherwise(F.lit(0)) for i, cond in enumerate(_conditions().values())]
    outcome = reduce(lambda a, b: a.bitwiseOR(b), bits)
    return facts.select(*OUTCOME_COLUMNS[:-1], outcome.alias("outcome"))


def count_of(name: str) -> Column:
    """How many of a group's messages had outcome ``name`` (one of ``OUTCOMES``): a long, 0 for none."""
    bit = F.shiftright(F.col("outcome"), OUTCOMES.index(name)).bitwiseAND(F.lit(1))
    return F.coalesce(F.sum(bit.cast("long")), F.lit(0)).cast("long").alias(name)
