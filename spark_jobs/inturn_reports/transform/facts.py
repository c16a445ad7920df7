"""One row per message: its outcome, timings, device delivery time and its place in room order.

A message is identified by (room_id, message_id) and belongs to the day and mode of its first event
and to the platform its events name. Acks are matched by (room_id, message_id) when the platform
echoed the message id, else by ``platform_message_id`` through the events of the ack's room that carry one
(``dispatched`` events, and the terminal event, which carries it too): the worker, too, matches such an ack
only in the room the webhook gave it.

The worker writes either a ``dispatched`` event per send plus a terminal event (older nights), or the
terminal event alone with the send's ``sent_at_ms`` and ``platform_message_id`` on it: both read alike.

The plan: events and the acks naming their message are brought to one narrow row shape (each event
type and ack status a bit of one int) and shuffled once, by room; the acks known only by platform
message id are shuffled by room too. In each room partition, those acks are combined per (room, id)
and joined to the events carrying the id (min and bit-or aggregates only, so an id named by two
events of the same message counts once), one hash aggregation makes the messages, and one sort
orders them for the room-order windows, with no further shuffle. docs/reports.md shows the plan.
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
#: One bit per event type and per ack status: a message's rows are combined with bit_or, so every
#: "was there one?" the facts ask takes one fixed-width buffer together instead of one each.
_EVENT_BIT = {kind.value: 1 << i for i, kind in enumerate(EventType)}
_ACK_BIT = {status.value: 1 << (16 + i) for i, status in enumerate(AckStatus)}
#: Marks an ack's row in ``_flags`` (the statuses' bits alone do not: an ack of an unknown status has none).
_ACK_ROW = 1 << 30
_TERMINAL_BITS = sum(_EVENT_BIT[t] for t in _TERMINAL)
#: The one narrow row shape of events and acks: the per-message aggregation tells an event's values from an
#: ack's by ``_ACK_ROW``, so three time columns serve both (null where the row says nothing of them):
#: ``_t1``: an event's ``ts_ms``, an ack's ``delivered`` platform time; ``_t2``: an event's send time (a
#: ``dispatched`` event's ``sent_at_ms`` or ``ts_ms``, a terminal event's ``sent_at_ms``), an ack's ``sent``
#: platform time; ``_t3``: a synchronous platform's answer (``acked`` with detail ``answered``), an ack's
#: first positive status received by the webhook.
_ROW_VALUES = {"_mode": "int", "partition": "int", "offset": "long", "created_at_ms": "long",
               "_t1": "long", "_t2": "long", "_t3": "long"}  # fmt: skip


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


def _bit(value: Column, bits: dict[str, int]) -> Column:
    """The bit of ``value`` in ``bits`` (a literal mapping, no lookup table); 0 for a value not in it."""
    bit: Column = F.lit(0)
    for name, mask in bits.items():
        bit = F.when(value == name, F.lit(mask)).otherwise(bit)
    return bit


def _has(mask: int) -> Column:
    """True when a message's combined ``_flags`` hold ``mask``."""
    return F.coalesce(F.col("_flags"), F.lit(0)).bitwiseAND(F.lit(mask)) != 0


def _null(columns: dict[str, str]) -> list[Column]:
    return [F.lit(None).cast(kind).alias(name) for name, kind in columns.items()]


def _event_rows(events: DataFrame) -> DataFrame:
    """Each event in the narrow row shape (``_ROW_VALUES``): its type as a bit, its times in the shared columns.

    ``_pmid`` is the platform message id of an event that carries the send's (``dispatched``, terminal): the key
    the room's acks that do not name their message are joined on."""
    terminal = F.col("type").isin(*_TERMINAL)
    sent_at = F.col("sent_at_ms")
    carries_send = _is(EventType.DISPATCHED) | terminal
    return events.select(
        *_KEY,
        "platform",
        _bit(F.col("type"), _EVENT_BIT).alias("_flags"),
        F.array_position(_modes(), F.col("mode")).cast("int").alias("_mode"),
        "partition",
        "offset",
        "created_at_ms",
        F.col("ts_ms").alias("_t1"),
        F.when(_is(EventType.DISPATCHED), F.coalesce(sent_at, F.col("ts_ms"))).when(terminal, sent_at).alias("_t2"),
        # When a synchronous platform's answer acknowledged the message.
        F.when(_is(EventType.ACKED) & (F.col("detail") == ANSWERED), F.col("acked_at_ms")).alias("_t3"),
        F.when(carries_send, F.col("platform_message_id")).alias("_pmid"),
    )


def _ack_values(acks: DataFrame, *keep: Column | str) -> list[Column]:
    """Each ack as the values the facts aggregate: status times as columns, null where the status differs."""
    status, ts = F.col("status"), F.col("platform_ts_ms")
    positive = status.isin(AckStatus.SENT.value, AckStatus.DELIVERED.value, AckStatus.READ.value)
    return [
        *[F.col(k) if isinstance(k, str) else k for k in keep],
        _bit(status, _ACK_BIT).alias("_flags"),
        F.when(status == AckStatus.DELIVERED.value, ts).alias("_t1"),
        F.when(status == AckStatus.SENT.value, ts).alias("_t2"),
        F.when(positive, F.col("received_at_ms")).alias("_t3"),
    ]


_ACK_TIMES = ("_t1", "_t2", "_t3")
#: An event row's columns for the values of the acks joined to it by platform message id (``_by_pmid``).
_PMID_VALUES = {"_flags": "_pflags", "_t1": "_p1", "_t2": "_p2", "_t3": "_p3"}


def _named_ack_rows(acks: DataFrame) -> DataFrame:
    """The acks that name their message, in the narrow row shape (``_ACK_ROW`` set, no event values)."""
    no_event_values = _null({k: v for k, v in _ROW_VALUES.items() if k not in _ACK_TIMES})
    named = acks.where(F.col("message_id").isNotNull()).select(*_ack_values(acks, *_KEY, "platform"))
    return named.select(
        *_KEY,
        "platform",
        F.col("_flags").bitwiseOR(F.lit(_ACK_ROW)).alias("_flags"),
        *no_event_values,
        *_ACK_TIMES,
        F.lit(None).cast("string").alias("_pmid"),
    )


def _by_pmid(acks: DataFrame) -> DataFrame:
    """The acks that do not name their message, combined per room and platform message id.

    Shuffled by room like the events, so the join that gives them their message runs in the room's partition.
    Every value combines with min, the status bits with bit_or, so an id named by two events of the same message
    counts once.
    """
    unnamed = acks.where(F.col("message_id").isNull()).select(
        *_ack_values(acks, "room_id", F.col("platform_message_id").alias("_pmid"))
    )
    return (
        unnamed.repartition("room_id")
        .groupBy("room_id", "_pmid")
        .agg(
            F.bit_or("_flags").alias(_PMID_VALUES["_flags"]),
            *[F.min(c).alias(_PMID_VALUES[c]) for c in _ACK_TIMES],
        )
    )


def _per_message(rows: DataFrame) -> DataFrame:
    """One aggregation over a message's events and matched acks together.

    The acks naming the message are rows of their own; those known by platform message id come as the ``_p``
    columns of the event rows they were joined to (``_by_pmid``). Every aggregate ignores nulls, and reads only
    the rows of its kind: events or acks (``_ACK_ROW``),
    and for the send and terminal times the event types they come from. The platform is part of the key
    (every event of a message names the message's platform; an ack naming its message counts for the message
    of its own platform). Every aggregate keeps a fixed-width buffer, so Spark aggregates in a hash table.
    """
    flags = F.col("_flags")
    is_ack = flags.bitwiseAND(F.lit(_ACK_ROW)) != 0
    dispatched = flags.bitwiseAND(F.lit(_EVENT_BIT[EventType.DISPATCHED.value])) != 0
    terminal = flags.bitwiseAND(F.lit(_TERMINAL_BITS)) != 0
    retried = flags.bitwiseAND(F.lit(_EVENT_BIT[EventType.RETRIED.value])) != 0
    t1, t2, t3 = F.col("_t1"), F.col("_t2"), F.col("_t3")

    def count(cond: Column) -> Column:  # a sum over the message's events (null without any, as before)
        return F.sum(F.when(~is_ack, cond.cast("int")))

    def acked(column: str) -> Column:  # an ack row's own value, an event row's from the acks joined to it
        return F.min(F.when(is_ack, F.col(column)).otherwise(F.col(_PMID_VALUES[column])))

    return rows.groupBy(*_KEY, "platform").agg(
        F.bit_or(flags.bitwiseOR(F.coalesce(F.col(_PMID_VALUES["_flags"]), F.lit(0)))).alias("_flags"),
        # A message has one mode and offset; min() only makes the choice deterministic.
        F.min("_mode").alias("_mode"),
        F.min("partition").alias("partition"),
        F.min("offset").alias("offset"),
        F.min(F.when(~is_ack, t1)).alias("first_ts_ms"),
        F.min("created_at_ms").alias("created_at_ms"),
        F.min(F.when(dispatched, t2)).alias("_dispatched_ms"),
        F.min(F.when(terminal, t2)).alias("_terminal_sent_ms"),
        F.min(F.when(terminal, t1)).alias("_terminal_ms"),
        F.min(F.when(~is_ack, t3)).alias("_answered_ms"),
        count(dispatched).alias("_dispatched"),
        count(terminal & t2.isNotNull()).alias("_terminal_sends"),
        count(retried).alias("_retries"),
        acked("_t1").alias("_delivered_ts"),
        acked("_t2").alias("_sent_ts"),
        acked("_t3").alias("_first_ack"),
    )


#: The columns a message's facts take as the aggregation gave them.
_CARRIED = (*_KEY, "platform", "partition", "offset", "first_ts_ms", "created_at_ms")


def _message_columns() -> list[Column | str]:
    """One aggregated message as the room-order sort carries it: its aggregates, those read together combined.

    Every value of the facts is computed from these after the windows (``_fact_columns``): a row the sort
    moves is the narrower for it (the mode stays a number, the yes/no outcomes stay the bits of ``_flags``).
    """
    dispatched = F.coalesce(F.col("_dispatched"), F.lit(0))
    return [
        *_CARRIED,
        "_mode",
        "_flags",
        "_retries",
        F.when(dispatched > 0, dispatched).otherwise(F.coalesce("_terminal_sends", F.lit(0))).alias("dispatches"),
        F.coalesce("_dispatched_ms", "_terminal_sent_ms").alias("dispatch_ms"),
        "_terminal_ms",
        "_delivered_ts",
        "_sent_ts",
        # A synchronous platform calls nothing back: the send's answer is its first ack.
        F.coalesce("_first_ack", "_answered_ms").alias("_first_ack"),
    ]


def _fact_columns() -> list[Column | str]:
    """The facts of one message, each from its ``_message_columns`` (one projection, no chain)."""
    first_ack, dispatch_ms = F.col("_first_ack"), F.col("dispatch_ms")
    event = {kind: _has(_EVENT_BIT[kind.value]) for kind in EventType}
    return [
        *_CARRIED,
        F.get(_modes(), F.col("_mode") - 1).alias("mode"),
        F.to_date(F.timestamp_millis("first_ts_ms")).alias("date"),
        "dispatches",
        "dispatch_ms",
        F.col("_terminal_ms").alias("terminal_ms"),
        F.coalesce("_retries", F.lit(0)).alias("retries"),
        event[EventType.ACKED].alias("acked"),
        event[EventType.ACK_TIMEOUT].alias("ack_timeout"),
        event[EventType.LATE_ACK].alias("late_ack"),
        event[EventType.DEAD_LETTERED].alias("dead_lettered"),
        event[EventType.SKIPPED_DUPLICATE].alias("skipped_duplicate"),
        event[EventType.SENT].alias("sent"),
        F.col("_delivered_ts").alias("delivered_ts_ms"),
        F.col("_sent_ts").alias("platform_sent_ts_ms"),
        first_ack.alias("first_ack_received_ms"),
        _device_ts().alias("device_ts_ms"),
        (F.col("_delivered_ts").isNotNull() | _has(_ACK_BIT[AckStatus.READ.value])).alias("delivered"),
        _has(_ACK_BIT[AckStatus.FAILED.value]).alias("failed"),
        (first_ack - dispatch_ms).alias("ack_latency_ms"),
        (first_ack - F.col("created_at_ms")).alias("e2e_latency_ms"),
    ]


def _device_ts() -> Column:
    return F.coalesce("_delivered_ts", "_sent_ts")


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
    # One shuffle of the events and named acks, by room; the acks known by platform message id are shuffled by
    # room too, so joining them to their events, the per-message aggregation and the room-order windows below all
    # run in the room's partition (``session.CO_PARTITIONED``).
    rows = _event_rows(events).unionByName(_named_ack_rows(acks)).repartition("room_id")
    rows = rows.join(_by_pmid(acks).hint("shuffle_hash"), ["room_id", "_pmid"], "left")
    messages = (
        _per_message(rows)
        # Keys with acks but no event have no first_ts_ms and drop out here, as unmatched acks do.
        .where((F.col("first_ts_ms") >= params.from_ms) & (F.col("first_ts_ms") < params.to_ms))
        .select(*_message_columns())
    )
    # The room's hash leads the window's partition key only to make the sort cheap: its 8-byte sort prefix
    # then tells almost every two rooms apart, where a prefix of the room id ("room-12...") rarely does. The
    # room id stays in the key, so two rooms whose hashes collide are still two windows.
    room = [F.xxhash64("room_id"), F.col("room_id")]
    before = Window.partitionBy(*room).orderBy("partition", "offset", "message_id")
    before = before.rowsBetween(Window.unboundedPreceding, -1)
    device = _device_ts()
    windowed = messages.select(
        "*",
        F.last(device, ignorenulls=True).over(before).alias("_prev_device"),
        F.last(F.when(F.col("dispatches") > 0, F.col("_terminal_ms")), ignorenulls=True)
        .over(before)
        .alias("_prev_end"),
    )
    # A select of its own after the windows: with them in one select, Spark would compute every fact column
    # below the windows, and the sort would carry them.
    return windowed.select(
        *_fact_columns(),
        F.when(device.isNotNull(), device < F.col("_prev_device")).alias("inverted"),
        F.when(F.col("dispatch_ms").isNotNull(), F.col("dispatch_ms") < F.col("_prev_end")).alias("dispatch_violation"),
    )
