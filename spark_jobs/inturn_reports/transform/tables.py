"""The report tables, each a pure transform of the message facts (see ``facts.message_facts``)."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from inturn_reports.transform.facts import ReportParams

#: Upper edges (inclusive, ms) of the latency histogram's buckets; the last bucket is open-ended (null edge).
LATENCY_EDGES_MS = (10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)

_GROUP = ["date", "platform", "mode"]
#: The summary's latency percentiles: level -> column suffix.
_LEVELS = {0.5: "p50", 0.95: "p95", 0.99: "p99"}

#: The message facts' columns the tables below read: a job that keeps the facts in memory keeps only these.
FACT_COLUMNS = (
    "date", "room_id", "platform", "mode", "first_ts_ms", "dispatches", "delivered", "acked", "ack_timeout",
    "late_ack", "retries", "dead_lettered", "skipped_duplicate", "sent", "failed", "device_ts_ms",
    "ack_latency_ms", "e2e_latency_ms", "inverted", "dispatch_violation",
)  # fmt: skip


def _n(cond: Column) -> Column:
    return F.coalesce(F.sum(cond.cast("long")), F.lit(0)).cast("long")


def _rate(part: str, whole: str) -> Column:
    return F.when(F.col(whole) > 0, F.col(part) / F.col(whole))


def summary(facts: DataFrame, params: ReportParams) -> DataFrame:
    """Per day, platform and mode: outcome counts and rates, latency percentiles, out-of-order rate."""
    del params  # the facts already hold the range
    table = facts.groupBy(*_GROUP).agg(
        F.count(F.lit(1)).alias("messages"),
        _n(F.col("dispatches") > 0).alias("dispatched"),
        _n(F.col("delivered")).alias("delivered"),
        _n(F.col("acked")).alias("acked"),
        _n(F.col("ack_timeout")).alias("ack_timeouts"),
        _n(F.col("late_ack")).alias("late_acks"),
        F.sum("retries").cast("long").alias("retries"),
        _n(F.col("dead_lettered")).alias("dead_letters"),
        _n(F.col("skipped_duplicate")).alias("skipped_duplicates"),
        _n(F.col("sent")).alias("sent_unacked"),
        _n(F.col("dispatches") > 1).alias("duplicates"),
        _n(F.col("failed")).alias("failed"),
        _n(F.col("device_ts_ms").isNull()).alias("no_device_ts"),
        # One exact percentile() per measure for all three levels: one buffer of values per group, not three.
        F.percentile("ack_latency_ms", list(_LEVELS)).alias("_ack_p"),
        F.percentile("e2e_latency_ms", list(_LEVELS)).alias("_e2e_p"),
        _n(F.col("inverted").isNotNull()).alias("pairs"),
        _n(F.col("inverted")).alias("inverted"),
        _n(F.col("dispatch_violation").isNotNull()).alias("dispatch_pairs"),
        _n(F.col("dispatch_violation")).alias("dispatch_violations"),
    )
    levels = [
        F.col(f"_{measure}_p")[i].alias(f"{measure}_{label}_ms")
        for measure in ("ack", "e2e")
        for i, label in enumerate(_LEVELS.values())
    ]
    at = table.columns.index("_ack_p")
    table = table.select(*table.columns[:at], *levels, *table.columns[at + 2 :])
    for name, part in [
        ("delivered_rate", "delivered"),
        ("ack_rate", "acked"),
        ("timeout_rate", "ack_timeouts"),
        ("late_ack_rate", "late_acks"),
        ("dead_letter_rate", "dead_letters"),
        ("duplicate_rate", "duplicates"),
    ]:
        table = table.withColumn(name, _rate(part, "messages"))
    return table.withColumn("out_of_order_rate", _rate("inverted", "pairs"))


def platforms(facts: DataFrame, params: ReportParams) -> DataFrame:
    """Per day and platform, over every mode: the figures the trend charts show night after night.

    ``delivered_rate`` = delivered / messages, ``out_of_order_rate`` = inverted / pairs, ``ack_timeouts``,
    and ``e2e_p99_ms`` (exact, linear interpolation, as in the summary).
    """
    del params
    return (
        facts.groupBy("date", "platform")
        .agg(
            F.count(F.lit(1)).alias("messages"),
            _n(F.col("delivered")).alias("delivered"),
            _n(F.col("ack_timeout")).alias("ack_timeouts"),
            _n(F.col("inverted").isNotNull()).alias("pairs"),
            _n(F.col("inverted")).alias("inverted"),
            F.percentile("e2e_latency_ms", 0.99).alias("e2e_p99_ms"),
        )
        .withColumn("delivered_rate", _rate("delivered", "messages"))
        .withColumn("out_of_order_rate", _rate("inverted", "pairs"))
    )


def _room_p95(facts: DataFrame, keys: list[str]) -> DataFrame:
    """The facts with ``_lo``/``_hi``: the e2e latencies at the two ranks the group's exact p95 lies between.

    A window per room sorts its own latencies (no per-room buffer of values in an aggregation, which
    Spark cannot keep in a hash table); ``_p95`` then interpolates linearly between the closest ranks
    as ``percentile`` does.
    """
    group = Window.partitionBy(*keys)
    latency = F.col("e2e_latency_ms")
    rank = F.row_number().over(group.orderBy(latency.asc_nulls_last())) - 1
    position = (F.count(latency).over(group) - 1) * 0.95
    return (
        facts.withColumn("_rank", rank)
        .withColumn("_pos", position)
        .withColumn("_lo", F.when(F.col("_rank") == F.floor("_pos"), latency))
        .withColumn("_hi", F.when(F.col("_rank") == F.ceil("_pos"), latency))
    )


def _p95(pos: Column, lo: Column, hi: Column) -> Column:
    return F.when(F.ceil(pos) == F.floor(pos), lo.cast("double")).otherwise(
        (F.ceil(pos) - pos) * lo + (pos - F.floor(pos)) * hi
    )


def rooms(facts: DataFrame, params: ReportParams) -> DataFrame:
    """Per day and room: messages, timeouts, late acks, dead letters, out-of-order rate and exact p95 latency."""
    del params
    keys = ["date", "room_id", "platform", "mode"]
    return (
        _room_p95(facts, keys)
        .groupBy(*keys)
        .agg(
            F.count(F.lit(1)).alias("messages"),
            _n(F.col("ack_timeout")).alias("ack_timeouts"),
            _n(F.col("late_ack")).alias("late_acks"),
            _n(F.col("dead_lettered")).alias("dead_letters"),
            _n(F.col("inverted").isNotNull()).alias("pairs"),
            _n(F.col("inverted")).alias("inverted"),
            _n(F.col("dispatch_violation")).alias("dispatch_violations"),
            _p95(F.max("_pos"), F.max("_lo"), F.max("_hi")).alias("e2e_p95_ms"),
        )
        .withColumn("out_of_order_rate", _rate("inverted", "pairs"))
    )


def worst_rooms(rooms_table: DataFrame, params: ReportParams) -> DataFrame:
    """Per day, the ``top_n`` rooms by out-of-order rate, by ack timeouts and by p95 end-to-end latency.

    Only rooms where the measure means something take part (pairs > 0, timeouts > 0, a latency);
    ties go to the smaller room id, so the list is the same on every run.
    """
    measures = [
        ("out_of_order_rate", F.col("pairs") > 0),
        ("ack_timeouts", F.col("ack_timeouts") > 0),
        ("e2e_p95_ms", F.col("e2e_p95_ms").isNotNull()),
    ]
    ranked = [
        rooms_table.where(where).select(
            "date",
            F.lit(measure).alias("measure"),
            "room_id",
            "platform",
            "mode",
            F.col(measure).cast("double").alias("value"),
        )
        for measure, where in measures
    ]
    order = Window.partitionBy("date", "measure").orderBy(F.col("value").desc(), F.col("room_id"))
    return (
        reduce(DataFrame.unionByName, ranked)
        .withColumn("rank", F.row_number().over(order))
        .where(F.col("rank") <= params.top_n)
        .select("date", "measure", "rank", "room_id", "platform", "mode", "value")
    )


def timeline(facts: DataFrame, params: ReportParams) -> DataFrame:
    """Outcomes over time: per bucket of ``timeline_bucket_ms`` (by first event) and mode."""
    width = params.timeline_bucket_ms
    return (
        facts.withColumn("bucket_start_ms", F.floor(F.col("first_ts_ms") / width).cast("long") * width)
        .groupBy("date", "bucket_start_ms", "mode")
        .agg(
            F.count(F.lit(1)).alias("messages"),
            _n(F.col("acked")).alias("acked"),
            _n(F.col("sent")).alias("sent_unacked"),
            _n(F.col("ack_timeout")).alias("ack_timeouts"),
            _n(F.col("late_ack")).alias("late_acks"),
            _n(F.col("dead_lettered")).alias("dead_letters"),
        )
    )


def _bucket(latency: Column) -> Column:
    edge: Column = F.lit(None).cast("long")
    for upper in reversed(LATENCY_EDGES_MS):
        edge = F.when(latency <= upper, F.lit(upper).cast("long")).otherwise(edge)
    return edge


def latency_histogram(facts: DataFrame, params: ReportParams) -> DataFrame:
    """Per day, mode and measure ('ack' or 'e2e'): message counts per latency bucket.

    ``upper_ms`` is the bucket's inclusive upper edge (``LATENCY_EDGES_MS``); null for the open last one.
    """
    del params
    both = facts.select("date", "mode", F.lit("ack").alias("measure"), F.col("ack_latency_ms").alias("ms")).unionByName(
        facts.select("date", "mode", F.lit("e2e").alias("measure"), F.col("e2e_latency_ms").alias("ms"))
    )
    return (
        both.where(F.col("ms").isNotNull())
        .withColumn("upper_ms", _bucket(F.col("ms")))
        .groupBy("date", "mode", "measure", "upper_ms")
        .agg(F.count(F.lit(1)).alias("messages"))
    )
