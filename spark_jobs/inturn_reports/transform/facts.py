"""One row per message: its outcome, timings, device delivery time and its place in room order.

A message is identified by (room_id, message_id) and belongs to the day, platform and mode of its
first event. Acks are matched by (room_id, message_id) when the platform echoed the message id,
else by ``platform_message_id`` through the message's ``dispatched`` events.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from inturn.schemas import AckStatus, EventType

_KEY = ["room_id", "message_id"]
_ACK_COLUMNS = ("status", "platform_ts_ms", "received_at_ms")
#: String columns the per-message aggregation takes as codes (see ``_codes``).
_CODED = ("platform", "mode")


@dataclass(frozen=True)
class ReportParams:
    """What the transforms need to know about the run: the range and the table shapes."""

    from_ms: int  # messages whose first event is in [from_ms, to_ms) are reported
    to_ms: int
    top_n: int = 10
    timeline_bucket_ms: int = 3_600_000


def _has(kind: EventType) -> Column:
    return F.coalesce(F.max((F.col("type") == kind.value).cast("int")), F.lit(0)) == 1


def _count(kind: EventType) -> Column:
    return F.coalesce(F.sum((F.col("type") == kind.value).cast("int")), F.lit(0))


def _min_where(cond: Column, value: Column) -> Column:
    return F.min(F.when(cond, value))


def _codes(events: DataFrame, column: str) -> DataFrame:
    """Each distinct value of a string column of the events with its rank in sort order (a small table).

    The per-message aggregation takes the min of these ranks instead of the min of the strings: the
    same choice, made with numbers, which lets Spark aggregate in a hash table instead of sorting
    every record by message.
    """
    values = events.select(column).where(F.col(column).isNotNull()).distinct()
    return F.broadcast(values.withColumn(f"_{column}_code", F.dense_rank().over(Window.orderBy(column))))


def _event_rows(events: DataFrame, codes: dict[str, DataFrame]) -> DataFrame:
    """The events' columns the facts need (platform and mode as codes), plus the ack columns as nulls."""
    for column, table in codes.items():
        events = events.join(table, column, "left")
    return events.select(
        *_KEY,
        "type",
        *[f"_{column}_code" for column in codes],
        "partition",
        "offset",
        "ts_ms",
        "created_at_ms",
        "sent_at_ms",
        *[F.lit(None).cast("string" if c == "status" else "long").alias(c) for c in _ACK_COLUMNS],
    )


def _matched_acks(events: DataFrame, acks: DataFrame) -> DataFrame:
    """Acks with the (room_id, message_id) of the message they are about; unmatched ones are dropped."""
    by_pmid = (
        events.where((F.col("type") == EventType.DISPATCHED.value) & F.col("platform_message_id").isNotNull())
        .select(*_KEY, "platform_message_id")
        .dropDuplicates(["platform_message_id"])
    )
    named = acks.where(F.col("message_id").isNotNull()).select(*_KEY, *_ACK_COLUMNS)
    unnamed = (
        acks.where(F.col("message_id").isNull())
        .select("platform_message_id", *_ACK_COLUMNS)
        .join(by_pmid, "platform_message_id")
        .select(*_KEY, *_ACK_COLUMNS)
    )
    return named.unionByName(unnamed)


def _ack_rows(matched: DataFrame) -> DataFrame:
    """Matched acks in the shape of ``_event_rows`` (event columns null)."""
    nulls = {"type": "string", **{f"_{c}_code": "int" for c in _CODED}, "partition": "int", "offset": "long",
             "ts_ms": "long", "created_at_ms": "long", "sent_at_ms": "long"}  # fmt: skip
    return matched.select(*_KEY, *[F.lit(None).cast(t).alias(c) for c, t in nulls.items()], *_ACK_COLUMNS)


def _per_message(rows: DataFrame) -> DataFrame:
    """One aggregation over a message's events and matched acks together (no join between the two).

    Event rows have null ack columns and ack rows null event columns; every aggregate below ignores
    nulls, so each reads only the rows of its own kind.
    """
    kind = F.col("type")
    dispatched = kind == EventType.DISPATCHED.value
    terminal = kind.isin(
        EventType.ACKED.value,
        EventType.ACK_TIMEOUT.value,
        EventType.DEAD_LETTERED.value,
        EventType.SKIPPED_DUPLICATE.value,
        EventType.SENT.value,
    )
    status = F.col("status")
    positive = status.isin(AckStatus.SENT.value, AckStatus.DELIVERED.value, AckStatus.READ.value)
    return rows.groupBy(*_KEY).agg(
        # A message has one platform, mode and offset; min() only makes the choice deterministic.
        F.min("_platform_code").alias("_platform_code"),
        F.min("_mode_code").alias("_mode_code"),
        F.min("partition").alias("partition"),
        F.min("offset").alias("offset"),
        F.min("ts_ms").alias("first_ts_ms"),
        F.min("created_at_ms").alias("created_at_ms"),
        _count(EventType.DISPATCHED).alias("dispatches"),
        _min_where(dispatched, F.coalesce("sent_at_ms", "ts_ms")).alias("dispatch_ms"),
        _min_where(terminal, F.col("ts_ms")).alias("terminal_ms"),
        _has(EventType.ACKED).alias("acked"),
        _has(EventType.ACK_TIMEOUT).alias("ack_timeout"),
        _has(EventType.LATE_ACK).alias("late_ack"),
        _has(EventType.DEAD_LETTERED).alias("dead_lettered"),
        _has(EventType.SKIPPED_DUPLICATE).alias("skipped_duplicate"),
        _has(EventType.SENT).alias("sent"),
        _count(EventType.RETRIED).alias("retries"),
        _min_where(status == AckStatus.DELIVERED.value, F.col("platform_ts_ms")).alias("delivered_ts_ms"),
        _min_where(status == AckStatus.SENT.value, F.col("platform_ts_ms")).alias("platform_sent_ts_ms"),
        F.max((status == AckStatus.READ.value).cast("int")).alias("_read"),
        F.max((status == AckStatus.FAILED.value).cast("int")).alias("_failed"),
        _min_where(positive, F.col("received_at_ms")).alias("first_ack_received_ms"),
    )


def message_facts(events: DataFrame, acks: DataFrame, params: ReportParams) -> DataFrame:
    """One row per message first seen in ``[from_ms, to_ms)``, with outcome, latency and room-order columns.

    ``device_ts_ms`` is the platform timestamp of the ``delivered`` status, else of ``sent``, else null.
    ``inverted`` compares it with the previous message of the room (partition offset order) that has
    one: true when this one reached the device earlier; null when there is no such pair.
    ``dispatch_violation`` is true when this message was dispatched before the room's previous
    dispatched message reached its terminal event (must never happen in ``ack`` mode).
    """
    codes = {column: _codes(events, column) for column in _CODED}
    rows = _event_rows(events, codes).unionByName(_ack_rows(_matched_acks(events, acks)))
    facts = (
        # Shuffled once, by room: the per-message aggregation and the room-order window below both run
        # on this partitioning, so neither moves the rows again.
        _per_message(rows.repartition("room_id"))
        # Keys with acks but no event have no first_ts_ms and drop out here, as unmatched acks do.
        .where((F.col("first_ts_ms") >= params.from_ms) & (F.col("first_ts_ms") < params.to_ms))
        .withColumn("date", F.to_date(F.timestamp_millis("first_ts_ms")))
        .withColumn("device_ts_ms", F.coalesce("delivered_ts_ms", "platform_sent_ts_ms"))
        .withColumn("delivered", F.col("delivered_ts_ms").isNotNull() | (F.coalesce("_read", F.lit(0)) == 1))
        .withColumn("failed", F.coalesce("_failed", F.lit(0)) == 1)
        .withColumn("ack_latency_ms", F.col("first_ack_received_ms") - F.col("dispatch_ms"))
        .withColumn("e2e_latency_ms", F.col("first_ack_received_ms") - F.col("created_at_ms"))
        .drop("_read", "_failed")
    )
    named = facts
    for column, table in codes.items():  # the codes back to their strings (broadcast: the rows stay in place)
        named = named.join(table, f"_{column}_code", "left")
    strings = {f"_{column}_code": column for column in codes}
    facts = named.select(*[strings.get(c, c) for c in facts.columns])
    before = Window.partitionBy("room_id").orderBy("partition", "offset", "message_id")
    before = before.rowsBetween(Window.unboundedPreceding, -1)
    prev_device = F.last("device_ts_ms", ignorenulls=True).over(before)
    prev_terminal = F.last(F.when(F.col("dispatches") > 0, F.col("terminal_ms")), ignorenulls=True).over(before)
    return facts.withColumn(
        "inverted", F.when(F.col("device_ts_ms").isNotNull(), F.col("device_ts_ms") < prev_device)
    ).withColumn(
        "dispatch_violation",
        F.when(F.col("dispatch_ms").isNotNull(), F.col("dispatch_ms") < prev_terminal),
    )
