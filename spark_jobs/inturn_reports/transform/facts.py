"""One row per message: its outcome, timings, device delivery time and its place in room order.

A message is identified by (room_id, message_id) and belongs to the day and mode of its first event
and to the platform its events name. Acks are matched by (room_id, message_id) when the platform
echoed the message id, else by ``platform_message_id`` through the message's events that carry one
(``dispatched`` events, and the terminal event, which carries it too).

The worker writes either a ``dispatched`` event per send plus a terminal event (older nights), or the
terminal event alone with the send's ``sent_at_ms`` and ``platform_message_id`` on it: both read alike.

The plan: events and acks are brought to one narrow row shape and aggregated per message in one
hash aggregation, which Spark combines partially before its shuffle; acks known only by platform
message id are first combined per id and joined to the events that name it (min/max aggregates
only, so an id named by two events of the same message counts once). One more shuffle, by room,
orders each room's messages for the room-order window. docs/reports.md shows the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from inturn.schemas import ANSWERED, TERMINAL_EVENTS, AckStatus, EventType, OrderingMode

_KEY = ["room_id", "message_id"]
#: The modes in sort order: a message's mode travels through the aggregation as its 1-based position
#: here (a number aggregates in a hash table, a string would make Spark sort), and min() of positions
#: is min() of names.
_MODES = tuple(sorted(m.value for m in OrderingMode))
_TERMINAL = tuple(sorted(t.value for t in TERMINAL_EVENTS))
#: Per ack, what the message facts take from it; each is aggregated with min or max (see ``_ACK_AGGREGATES``).
_ACK_VALUES = ("_delivered_ts", "_sent_ts", "_read", "_failed", "_first_ack")
_EVENT_VALUES = {"type": "string", "_mode": "int", "partition": "int", "offset": "long", "ts_ms": "long",
                 "created_at_ms": "long", "sent_at_ms": "long", "_answered_ms": "long"}  # fmt: skip


@dataclass(frozen=True)
class ReportParams:
    """What the transforms need to know about the run: the range and the table shapes."""

    from_ms: int  # messages whose first event is in [from_ms, to_ms) are reported
    to_ms: int
    top_n: int = 10
    timeline_bucket_ms: int = 3_600_000


def _modes() -> Column:
    return F.array(*[F.lit(m) for m in _MODES])


def _is(kind: EventType) -> Column:
    return F.col("type") == kind.value


def _has(kind: EventType) -> Column:
    return F.coalesce(F.max(_is(kind).cast("int")), F.lit(0)) == 1


def _count(cond: Column) -> Column:
    return F.coalesce(F.sum(cond.cast("int")), F.lit(0))


def _min_where(cond: Column, value: Column) -> Column:
    return F.min(F.when(cond, value))


def _ack_values(acks: DataFrame, *keep: str) -> DataFrame:
    """Each ack as the values the facts aggregate: status times as columns, null where the status differs."""
    status, ts = F.col("status"), F.col("platform_ts_ms")
    positive = status.isin(AckStatus.SENT.value, AckStatus.DELIVERED.value, AckStatus.READ.value)
    return acks.select(
        *keep,
        F.when(status == AckStatus.DELIVERED.value, ts).alias("_delivered_ts"),
        F.when(status == AckStatus.SENT.value, ts).alias("_sent_ts"),
        (status == AckStatus.READ.value).cast("int").alias("_read"),
        (status == AckStatus.FAILED.value).cast("int").alias("_failed"),
        F.when(positive, F.col("received_at_ms")).alias("_first_ack"),
    )


def _ack_aggregates() -> list[Column]:
    """How a message's (or a platform message id's) ack values combine; applying them twice changes nothing."""
    return [
        F.min("_delivered_ts").alias("_delivered_ts"),
        F.min("_sent_ts").alias("_sent_ts"),
        F.max("_read").alias("_read"),
        F.max("_failed").alias("_failed"),
        F.min("_first_ack").alias("_first_ack"),
    ]


def _matched_acks(events: DataFrame, acks: DataFrame) -> DataFrame:
    """The acks' values keyed by the message they are about; acks of no known message are dropped.

    An ack naming its message keeps its own row (the per-message aggregation combines it). The others
    are combined per platform message id first, then joined to the events carrying that id, which
    give the message and its platform.
    """
    named = _ack_values(acks.where(F.col("message_id").isNotNull()), *_KEY, "platform")
    owners = events.where(
        F.col("platform_message_id").isNotNull() & F.col("type").isin(EventType.DISPATCHED.value, *_TERMINAL)
    ).select("platform_message_id", *_KEY, "platform")
    by_pmid = (
        _ack_values(acks.where(F.col("message_id").isNull()), "platform_message_id")
        .groupBy("platform_message_id")
        .agg(*_ack_aggregates())
    )
    unnamed = by_pmid.join(owners, "platform_message_id").select(*_KEY, "platform", *_ACK_VALUES)
    return named.unionByName(unnamed)


def _event_value(column: str) -> Column:
    """An event row's value for ``column`` of ``_EVENT_VALUES``."""
    if column == "_mode":
        return F.array_position(_modes(), F.col("mode")).cast("int")
    if column == "_answered_ms":  # when a synchronous platform's answer acknowledged the message
        return F.when(_is(EventType.ACKED) & (F.col("detail") == ANSWERED), F.col("acked_at_ms"))
    return F.col(column)


def _rows(events: DataFrame, acks: DataFrame) -> DataFrame:
    """Events and matched acks in one shape: event columns null on ack rows, ack values null on event rows."""
    event_rows = events.select(
        *_KEY,
        "platform",
        *[_event_value(c).alias(c) for c in _EVENT_VALUES],
        *[F.lit(None).cast("int" if c in ("_read", "_failed") else "long").alias(c) for c in _ACK_VALUES],
    )
    ack_rows = _matched_acks(events, acks).select(
        *_KEY, "platform", *[F.lit(None).cast(t).alias(c) for c, t in _EVENT_VALUES.items()], *_ACK_VALUES
    )
    return event_rows.unionByName(ack_rows)


def _per_message(rows: DataFrame) -> DataFrame:
    """One aggregation over a message's events and matched acks together (no join between the two).

    Every aggregate ignores nulls, so each reads only the rows of its own kind. The platform is part
    of the key (every event of a message names the message's platform; an ack counts for the message
    of its own platform). Every other aggregate keeps a fixed-width buffer, so Spark aggregates in a
    hash table and combines each task's rows before the shuffle.
    """
    terminal = F.col("type").isin(*_TERMINAL)
    sent_at = F.col("sent_at_ms")
    return rows.groupBy(*_KEY, "platform").agg(
        # A message has one mode and offset; min() only makes the choice deterministic.
        F.min("_mode").alias("_mode"),
        F.min("partition").alias("partition"),
        F.min("offset").alias("offset"),
        F.min("ts_ms").alias("first_ts_ms"),
        F.min("created_at_ms").alias("created_at_ms"),
        _count(_is(EventType.DISPATCHED)).alias("_dispatched_events"),
        _count(terminal & sent_at.isNotNull()).alias("_terminal_sends"),
        _min_where(_is(EventType.DISPATCHED), F.coalesce(sent_at, F.col("ts_ms"))).alias("_dispatched_ms"),
        _min_where(terminal, sent_at).alias("_terminal_sent_ms"),
        _min_where(terminal, F.col("ts_ms")).alias("terminal_ms"),
        _has(EventType.ACKED).alias("acked"),
        _has(EventType.ACK_TIMEOUT).alias("ack_timeout"),
        _has(EventType.LATE_ACK).alias("late_ack"),
        _has(EventType.DEAD_LETTERED).alias("dead_lettered"),
        _has(EventType.SKIPPED_DUPLICATE).alias("skipped_duplicate"),
        _has(EventType.SENT).alias("sent"),
        F.min("_answered_ms").alias("_answered_ms"),
        _count(_is(EventType.RETRIED)).alias("retries"),
        *_ack_aggregates(),
    )


def message_facts(events: DataFrame, acks: DataFrame, params: ReportParams) -> DataFrame:
    """One row per message first seen in ``[from_ms, to_ms)``, with outcome, latency and room-order columns.

    ``dispatches`` counts the message's ``dispatched`` events; a message without any counts its
    terminal events that carry ``sent_at_ms``. ``dispatch_ms`` is the first dispatched event's
    ``sent_at_ms``, else the terminal event's.
    ``device_ts_ms`` is the platform timestamp of the ``delivered`` status, else of ``sent``, else null.
    ``inverted`` compares it with the previous message of the room (partition offset order) that has
    one: true when this one reached the device earlier; null when there is no such pair.
    ``dispatch_violation`` is true when this message was dispatched before the room's previous
    dispatched message reached its terminal event (must never happen in ``ack`` mode).
    """
    dispatched = F.col("_dispatched_events")
    facts = (
        _per_message(_rows(events, acks))
        # Keys with acks but no event have no first_ts_ms and drop out here, as unmatched acks do.
        .where((F.col("first_ts_ms") >= params.from_ms) & (F.col("first_ts_ms") < params.to_ms))
        .withColumn("mode", F.get(_modes(), F.col("_mode") - 1))
        .withColumn("date", F.to_date(F.timestamp_millis("first_ts_ms")))
        .withColumn("dispatches", F.when(dispatched > 0, dispatched).otherwise(F.col("_terminal_sends")))
        .withColumn("dispatch_ms", F.coalesce("_dispatched_ms", "_terminal_sent_ms"))
        .withColumn("delivered_ts_ms", F.col("_delivered_ts"))
        .withColumn("platform_sent_ts_ms", F.col("_sent_ts"))
        # A synchronous platform calls nothing back: the send's answer is its first ack.
        .withColumn("_first_ack", F.coalesce("_first_ack", "_answered_ms"))
        .withColumn("first_ack_received_ms", F.col("_first_ack"))
        .withColumn("device_ts_ms", F.coalesce("_delivered_ts", "_sent_ts"))
        .withColumn("delivered", F.col("_delivered_ts").isNotNull() | (F.coalesce("_read", F.lit(0)) == 1))
        .withColumn("failed", F.coalesce("_failed", F.lit(0)) == 1)
        .withColumn("ack_latency_ms", F.col("_first_ack") - F.col("dispatch_ms"))
        .withColumn("e2e_latency_ms", F.col("_first_ack") - F.col("created_at_ms"))
    )
    facts = facts.drop(*[c for c in facts.columns if c.startswith("_")])
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
