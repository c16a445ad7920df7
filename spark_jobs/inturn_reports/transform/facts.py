"""The message facts and what the report tables count of them: one pass over each room's events and acks.

A message is identified by (room_id, message_id, platform) and belongs to the day and mode of its first event.
Acks are matched by (room_id, message_id) when the platform echoed the message id, else by
``platform_message_id`` through the events of the ack's room that carry one (``dispatched`` events, and the
terminal event, which carries it too): the worker, too, matches such an ack only in the room the webhook gave it.
The acks of one platform message id are combined first (min of each time, or of the status bits), so an id named
by two events of the same message counts once.

The worker writes either a ``dispatched`` event per send plus a terminal event (older nights), or the
terminal event alone with the send's ``sent_at_ms`` and ``platform_message_id`` on it: both read alike.

Per message (``arrow_pass``, which computes them):

- ``dispatches`` counts its ``dispatched`` events; a message without any counts its terminal events that carry
  ``sent_at_ms``. ``dispatch_ms`` is the first dispatched event's ``sent_at_ms``, else the terminal event's.
- its first ack is the first positive status the webhook received (or, from a synchronous platform, the
  ``answered`` acked event's ``acked_at_ms``); ``ack_latency_ms`` is that less ``dispatch_ms``, ``e2e_latency_ms``
  that less ``created_at_ms``.
- ``device_ts_ms`` is the platform timestamp of the ``delivered`` status, else of ``sent``, else null;
  ``device_latency_ms`` is that less ``dispatch_ms``, null on a platform that cannot time the device
  (``measurable``).
- ``inverted`` compares it with the previous message of the room (partition, offset, message id order) that has
  one: true when this one reached the device earlier; null when there is no such pair.
- ``dispatch_violation`` is true when the message was dispatched before the room's previous dispatched message
  reached its terminal event (must never happen in ``ack`` mode).

The plan: events and acks are brought to one narrow row shape (each event type and ack status a bit of one int)
and shuffled once, by room (Spark). Each task then runs ``arrow_pass`` over its rows: grouped by room, each room's
messages are aggregated, put in room order and compared, and counted into the rooms table, the cells and the
latency counts (``tables.split`` reads its output). docs/reports.md says why that pass is code of its own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from inturn.schemas import ANSWERED, TERMINAL_EVENTS, AckStatus, EventType, OrderingMode
from inturn_reports.transform.arrow_pass import DDL, MODE_SHIFT, PassParams, run_batches
from inturn_reports.transform.measurable import without_device_latency
from inturn_reports.transform.outcomes import OUTCOMES

_KEY = ["room_id", "message_id"]
#: The modes in sort order: an event's mode travels to the pass as its 1-based position here (0 for a mode
#: not among them), and the pass takes the least position of a message's events, which is the least name.
_MODES = tuple(sorted(m.value for m in OrderingMode))
_TERMINAL = tuple(sorted(t.value for t in TERMINAL_EVENTS))
#: One bit per event type and per ack status: the pass combines a message's rows with bit-or, so every
#: "was there one?" the facts ask is one bit of one int.
_EVENT_BIT = {kind.value: 1 << i for i, kind in enumerate(EventType)}
_ACK_BIT = {status.value: 1 << (16 + i) for i, status in enumerate(AckStatus)}
#: Marks an ack's row in ``_flags`` (the statuses' bits alone do not: an ack of an unknown status has none).
_ACK_ROW = 1 << 30
_TERMINAL_BITS = sum(_EVENT_BIT[t] for t in _TERMINAL)
#: An event's mode travels in ``_flags`` too, in the 8 bits from ``arrow_pass.MODE_SHIFT`` (below ``_ACK_ROW``): 0
#: for a null mode, else 1 + its position in ``_MODES`` (``array_position``: 0 for a mode not among them). One column
#: fewer to shuffle and to hand to the pass, whose cost is per value handed over (tests/reports/test_arrow_pass.py
#: checks that the fields do not overlap).
#: The one narrow row shape of events and acks: the pass tells an event's values from an ack's by
#: ``_ACK_ROW``, so three time columns serve both (null where the row says nothing of them):
#: ``_t1``: an event's ``ts_ms``, an ack's ``delivered`` platform time; ``_t2``: an event's send time (a
#: ``dispatched`` event's ``sent_at_ms`` or ``ts_ms``, a terminal event's ``sent_at_ms``), an ack's ``sent``
#: platform time; ``_t3``: a synchronous platform's answer (``acked`` with detail ``answered``), an ack's
#: first positive status received by the webhook.
_ROW_VALUES = {"partition": "int", "offset": "long", "created_at_ms": "long",
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
        _bit(F.col("type"), _EVENT_BIT)
        .bitwiseOR(
            F.shiftleft(F.coalesce(F.array_position(_modes(), F.col("mode")).cast("int") + 1, F.lit(0)), MODE_SHIFT)
        )
        .alias("_flags"),
        "partition",
        "offset",
        "created_at_ms",
        F.col("ts_ms").alias("_t1"),
        F.when(_is(EventType.DISPATCHED), F.coalesce(sent_at, F.col("ts_ms"))).when(terminal, sent_at).alias("_t2"),
        # When a synchronous platform's answer acknowledged the message.
        F.when(_is(EventType.ACKED) & (F.col("detail") == ANSWERED), F.col("acked_at_ms")).alias("_t3"),
        _pmid_hash(F.when(carries_send, F.col("platform_message_id"))),
    )


def _pmid_hash(pmid: Column) -> Column:
    """``_pmid``: a platform message id as its 64-bit hash (``xxhash64``; null stays null). The pass only matches the
    acks known by id to the room's events carrying the same id, so a long serves where the string cost its bytes in the
    shuffle, the hand-over and the pass's encoding. Two ids of one room with the same hash would be matched as one:
    for n ids in a room the chance is about n^2 / 2^65 (3e-12 for a room of 10,000 messages in a night)."""
    return F.when(pmid.isNotNull(), F.xxhash64(pmid)).alias("_pmid")


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


def _ack_rows(acks: DataFrame) -> DataFrame:
    """Every ack in the narrow row shape (``_ACK_ROW`` set, no event values). An ack that names its message keeps
    its ``message_id``; one that does not carries its platform message id as ``_pmid`` instead."""
    no_event_values = _null({k: v for k, v in _ROW_VALUES.items() if k not in _ACK_TIMES})
    pmid = _pmid_hash(F.when(F.col("message_id").isNull(), F.col("platform_message_id")))
    values = acks.select(*_ack_values(acks, *_KEY, "platform", pmid))
    return values.select(
        *_KEY,
        "platform",
        F.col("_flags").bitwiseOR(F.lit(_ACK_ROW)).alias("_flags"),
        *no_event_values,
        *_ACK_TIMES,
        "_pmid",
    )


def room_rows(events: DataFrame, acks: DataFrame) -> DataFrame:
    """Events and acks in the narrow row shape, shuffled by room: what ``arrow_pass`` reads."""
    return _event_rows(events).unionByName(_ack_rows(acks)).repartition("room_id")


#: The masks ``arrow_pass`` reads, in the order it takes them (``run_partition``).
MASKS = (
    _ACK_ROW,
    _EVENT_BIT[EventType.DISPATCHED.value],
    _TERMINAL_BITS,
    _EVENT_BIT[EventType.RETRIED.value],
    _ACK_BIT[AckStatus.READ.value],
    _ACK_BIT[AckStatus.FAILED.value],
    *[_EVENT_BIT[kind.value] for kind in (EventType.ACKED, EventType.ACK_TIMEOUT, EventType.LATE_ACK,
                                         EventType.DEAD_LETTERED, EventType.SKIPPED_DUPLICATE, EventType.SENT)],
)  # fmt: skip
#: The rooms table's percentile of its messages' end-to-end latencies.
ROOM_LEVEL = 0.95


def room_pass(events: DataFrame, acks: DataFrame, params: ReportParams) -> DataFrame:
    """The pass over the room rows of ``events`` and ``acks`` (``arrow_pass``, run by ``mapInArrow`` in each room
    partition): a frame of rooms-table rows (whole) and cell and latency-count rows (partial per task), told apart
    by ``kind``; ``tables.split`` makes the tables of it."""
    settings = PassParams(
        from_ms=params.from_ms,
        to_ms=params.to_ms,
        bucket_ms=params.timeline_bucket_ms,
        modes=_MODES,
        outcomes=len(OUTCOMES),
        masks=MASKS,
        level=ROOM_LEVEL,
        no_device_latency=without_device_latency(),
    )
    return room_rows(events, acks).mapInArrow(functools.partial(run_batches, p=settings), DDL)
