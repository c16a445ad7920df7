"""The small tables, computed on the driver from what Spark counted (Arrow tables, no Spark job each).

The pass over the rooms gives the rooms table and the two counts (``tables.split``): a few thousand cells and
the distinct latency values per group, at most a few hundred thousand rows at 10M events. Everything the report
shows besides is a sum or a ranking over those, so it is done here, in the driver's process: a Spark job per
small table (plan, schedule, generate and compile code, write one file) cost more than the table itself
(docs/reports.md).

Every table's columns and types are ``SCHEMAS``': the same as when Spark computed and wrote them, so the nights
written before and after read as one dataset (``trends``).
"""

from __future__ import annotations

import bisect
import datetime as dt
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from inturn_reports.transform.measurable import not_measurable
from inturn_reports.transform.outcomes import LATENCY_EDGES_MS, MEASURES, OUTCOMES

_LONG, _DOUBLE, _STRING = pa.int64(), pa.float64(), pa.string()
#: The summary's latency percentiles: level -> column suffix.
_LEVELS = {0.5: "p50", 0.95: "p95", 0.99: "p99"}
#: The summary's counts in its column order; the latency percentiles go before the pairs, as the page shows them.
_SUMMARY_COUNTS = ("messages", *OUTCOMES[:5], "retries", *OUTCOMES[5:11])
_SUMMARY_PAIRS = OUTCOMES[11:]
_SUMMARY_RATES = {
    "delivered_rate": "delivered",
    "ack_rate": "acked",
    "timeout_rate": "ack_timeouts",
    "late_ack_rate": "late_acks",
    "dead_letter_rate": "dead_letters",
    "duplicate_rate": "duplicates",
}
_PLATFORM_COUNTS = ("messages", "delivered", "ack_timeouts", "pairs", "inverted")
_TIMELINE_COUNTS = ("messages", "acked", "sent_unacked", "ack_timeouts", "late_acks", "dead_letters")
ROOM_COUNTS = ("ack_timeouts", "late_acks", "dead_letters", "pairs", "inverted", "dispatch_violations")


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(name, kind) for name, kind in fields])


#: Every table the report writes, as written (``date`` is the folder each night's rows are written under).
SCHEMAS: dict[str, pa.Schema] = {
    "summary": _schema(
        ("date", pa.date32()),
        ("platform", _STRING),
        ("mode", _STRING),
        *[(name, _LONG) for name in _SUMMARY_COUNTS],
        *[(f"{measure}_{label}_ms", _DOUBLE) for measure in MEASURES for label in _LEVELS.values()],
        *[(name, _LONG) for name in _SUMMARY_PAIRS],
        *[(name, _DOUBLE) for name in (*_SUMMARY_RATES, "out_of_order_rate")],
        ("out_of_order_note", _STRING),
        ("delivered_note", _STRING),
        ("device_latency_note", _STRING),
    ),
    "rooms": _schema(
        ("date", pa.date32()),
        ("room_id", _STRING),
        ("platform", _STRING),
        ("mode", _STRING),
        ("messages", _LONG),
        *[(name, _LONG) for name in ROOM_COUNTS],
        ("e2e_p95_ms", _DOUBLE),
        ("out_of_order_rate", _DOUBLE),
        ("out_of_order_note", _STRING),
    ),
    "worst_rooms": _schema(
        ("date", pa.date32()),
        ("measure", _STRING),
        ("rank", pa.int32()),
        ("room_id", _STRING),
        ("platform", _STRING),
        ("mode", _STRING),
        ("value", _DOUBLE),
    ),
    "timeline": _schema(
        ("date", pa.date32()),
        ("bucket_start_ms", _LONG),
        ("mode", _STRING),
        *[(name, _LONG) for name in _TIMELINE_COUNTS],
    ),
    "latency_histogram": _schema(
        ("date", pa.date32()), ("mode", _STRING), ("measure", _STRING), ("upper_ms", _LONG), ("messages", _LONG)
    ),
    "platforms": _schema(
        ("date", pa.date32()),
        ("platform", _STRING),
        *[(name, _LONG) for name in _PLATFORM_COUNTS],
        ("e2e_p99_ms", _DOUBLE),
        ("delivered_rate", _DOUBLE),
        ("out_of_order_rate", _DOUBLE),
        ("out_of_order_note", _STRING),
        ("delivered_note", _STRING),
    ),
}

Row = dict[str, Any]


@dataclass(frozen=True)
class CountedRows:
    """The two counts the small tables are summed from (``tables.split``): ``cells`` and ``latencies``."""

    cells: pa.Table
    latencies: pa.Table


def table(name: str, rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """``rows`` as the table ``name`` (``SCHEMAS``); a column a row lacks is null."""
    schema = SCHEMAS[name]
    return pa.Table.from_pylist([{f: row.get(f) for f in schema.names} for row in rows], schema=schema)


def conform(name: str, frame: pa.Table) -> pa.Table:
    """``frame`` with exactly the columns and types of the table ``name`` (Spark's nullability flags dropped)."""
    schema = SCHEMAS[name]
    return pa.Table.from_arrays([frame.column(f).cast(schema.field(f).type) for f in schema.names], schema=schema)


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole > 0 else None


def _sums(rows: Iterable[Mapping[str, Any]], keys: Sequence[str], names: Sequence[str]) -> dict[tuple[Any, ...], Row]:
    """Per value of ``keys``: the sums of ``names`` (in first-seen order of the keys)."""
    out: dict[tuple[Any, ...], Row] = {}
    for row in rows:
        key = tuple(row[k] for k in keys)
        acc = out.get(key)
        if acc is None:
            out[key] = acc = {**dict(zip(keys, key, strict=True)), **dict.fromkeys(names, 0)}
        for name in names:
            acc[name] += row[name]
    return out


def grouped(frame: pa.Table, keys: Sequence[str], aggregates: Mapping[str, str]) -> pa.Table:
    """Per value of ``keys`` (null is a value): each column of ``aggregates`` aggregated by its function
    (Arrow's, e.g. ``sum``, ``count``), under its own name."""
    out = frame.group_by(list(keys)).aggregate(list(aggregates.items()))
    return pa.table({**{k: out[k] for k in keys}, **{c: out[f"{c}_{f}"] for c, f in aggregates.items()}})


@dataclass(frozen=True)
class ValueCounts:
    """Distinct values in ascending order, and how many of each."""

    values: Sequence[int]
    counts: Sequence[int]


def _value_counts(latencies: pa.Table, keys: Sequence[str], measure: str) -> dict[tuple[Any, ...], ValueCounts]:
    """Per value of ``keys``: the distinct latencies of ``measure`` and how many messages had each."""
    rows = grouped(latencies.filter(pc.equal(latencies["measure"], measure)), [*keys, "ms"], {"messages": "sum"})
    lists = grouped(rows, keys, {"ms": "list", "messages": "list"})
    out = {}
    for row in lists.to_pylist():
        values, counts = zip(*sorted(zip(row["ms"], row["messages"], strict=True)), strict=True)
        out[tuple(row[k] for k in keys)] = ValueCounts(values, counts)
    return out


def percentiles(counted_values: ValueCounts, levels: Sequence[float]) -> list[float | None]:
    """The exact percentiles at ``levels`` of the values counted in ``counted_values``.

    As Spark's ``percentile`` with a frequency computes them: the position ``level * (n - 1)`` among the n sorted
    values, linear interpolation between the values at its floor and ceiling, in the same double arithmetic;
    None for no values.
    """
    values = counted_values.values
    if not values:
        return [None] * len(levels)
    accumulated = list(itertools.accumulate(counted_values.counts))
    total = accumulated[-1]

    def at(rank: int) -> int:  # the value of the rank-th (0-based) smallest
        return values[bisect.bisect_left(accumulated, rank + 1)]

    out: list[float | None] = []
    for level in levels:
        position = (total - 1) * level
        lower, higher = math.floor(position), math.ceil(position)
        low, high = at(lower), at(higher)
        if lower == higher or low == high:
            out.append(float(low))
        else:
            out.append((higher - position) * float(low) + (position - lower) * float(high))
    return out


def only_what_it_can_see(row: Row) -> Row:
    """``row`` (of a platform) with the figures its platform cannot report null, and the reasons as notes
    (``measurable``): never a 0 that only says nothing was seen."""
    platform = row.get("platform")
    row["out_of_order_note"] = not_measurable(platform, "out_of_order")
    if row["out_of_order_note"] is not None:
        for name in ("pairs", "inverted", "out_of_order_rate"):
            row[name] = None
    if "delivered_note" in row or "delivered" in row:
        row["delivered_note"] = not_measurable(platform, "delivered")
        if row["delivered_note"] is not None:
            row["delivered"] = row["delivered_rate"] = None
    if "device_p50_ms" in row or "device_latency_note" in row:
        row["device_latency_note"] = not_measurable(platform, "device_latency")
        if row["device_latency_note"] is not None:
            for label in _LEVELS.values():
                row[f"device_{label}_ms"] = None
    return row


def summary(c: CountedRows) -> pa.Table:
    """Per day, platform and mode: outcome counts and rates, latency percentiles (ack, e2e, device), out-of-order
    rate."""
    keys = ("date", "platform", "mode")
    groups = _sums(c.cells.to_pylist(), keys, (*_SUMMARY_COUNTS, *_SUMMARY_PAIRS))
    levels = list(_LEVELS)
    for measure in MEASURES:
        for key, counts in _value_counts(c.latencies, keys, measure).items():
            if key in groups:
                for label, value in zip(_LEVELS.values(), percentiles(counts, levels), strict=True):
                    groups[key][f"{measure}_{label}_ms"] = value
    for row in groups.values():
        for name, part in _SUMMARY_RATES.items():
            row[name] = _rate(row[part], row["messages"])
        row["out_of_order_rate"] = _rate(row["inverted"], row["pairs"])
        row["device_latency_note"] = None  # the summary has the device latency: its note too
        only_what_it_can_see(row)
    return table("summary", groups.values())


def platforms(c: CountedRows) -> pa.Table:
    """Per day and platform, over every mode: the figures the trend charts show night after night.

    ``delivered_rate`` = delivered / messages, ``out_of_order_rate`` = inverted / pairs, ``ack_timeouts``,
    and ``e2e_p99_ms`` (exact, linear interpolation, as in the summary).
    """
    keys = ("date", "platform")
    groups = _sums(c.cells.to_pylist(), keys, _PLATFORM_COUNTS)
    for key, counts in _value_counts(c.latencies, keys, "e2e").items():
        if key in groups:
            groups[key]["e2e_p99_ms"] = percentiles(counts, [0.99])[0]
    for row in groups.values():
        row["delivered_rate"] = _rate(row["delivered"], row["messages"])
        row["out_of_order_rate"] = _rate(row["inverted"], row["pairs"])
        only_what_it_can_see(row)
    return table("platforms", groups.values())


def timeline(c: CountedRows) -> pa.Table:
    """Outcomes over time: per bucket of the run's timeline width (by first event) and mode."""
    return table("timeline", _sums(c.cells.to_pylist(), ("date", "bucket_start_ms", "mode"), _TIMELINE_COUNTS).values())


def latency_histogram(c: CountedRows) -> pa.Table:
    """Per day, mode and measure ('ack', 'e2e' or 'device'; the device latency of the platforms that can time the
    device only): message counts per latency bucket.

    ``upper_ms`` is the bucket's inclusive upper edge (``LATENCY_EDGES_MS``); None for the open last one.
    """
    ms = c.latencies["ms"]
    upper = pa.nulls(len(ms), _LONG)
    for edge in reversed(LATENCY_EDGES_MS):
        upper = pc.if_else(pc.less_equal(ms, edge), pa.scalar(edge, _LONG), upper)
    keys = ["date", "mode", "measure", "upper_ms"]
    return conform(
        "latency_histogram", grouped(c.latencies.append_column("upper_ms", upper), keys, {"messages": "sum"})
    )


def top(
    rows: pa.Table,
    measures: Sequence[tuple[str, Callable[[pa.Table], pa.ChunkedArray]]],
    per: Sequence[str],
    top_n: int,
    carry: Sequence[str],
) -> list[Row]:
    """For each of ``measures`` (a name and which rows it ranks) and each value of ``per``: the ``top_n`` rows
    by that column, highest first, ties to the smaller room id; each with ``measure``, ``rank`` (from 1), the
    ``carry`` columns and ``value`` (the measure as a double)."""
    out: list[Row] = []
    for measure, where in measures:
        ranked = rows.select([*per, *carry, measure]).filter(where(rows))  # copies only the columns it keeps
        ranked = ranked.append_column("value", ranked[measure].cast(_DOUBLE)).drop_columns([measure])
        groups = ranked.select(list(per)).group_by(list(per)).aggregate([]).to_pylist() if per else [{}]
        for group in groups:
            part = ranked
            for name, value in group.items():
                part = part.filter(pc.equal(part[name], value))
            order = [("value", "descending"), ("room_id", "ascending")]
            best = part.take(pc.select_k_unstable(part, k=top_n, sort_keys=order)).sort_by(order)
            out.extend({**row, "measure": measure, "rank": rank} for rank, row in enumerate(best.to_pylist(), start=1))
    return out


#: The measures the worst rooms are ranked by, and the rooms that take part in each: those whose measure is above 0
#: (a room with nothing out of order or no timeout is not among the worst, and a room whose platform cannot order
#: its messages has no rate). The trends rank by the first two over the nights.
WORST: list[tuple[str, Callable[[pa.Table], pa.ChunkedArray]]] = [
    ("out_of_order_rate", lambda t: pc.greater(t["out_of_order_rate"], 0)),
    ("ack_timeouts", lambda t: pc.greater(t["ack_timeouts"], 0)),
    ("e2e_p95_ms", lambda t: pc.greater(t["e2e_p95_ms"], 0)),
]


def worst_rooms(rooms_table: pa.Table, top_n: int) -> pa.Table:
    """Per day, the ``top_n`` rooms by out-of-order rate, by ack timeouts and by p95 end-to-end latency.

    Only rooms whose measure is above 0 take part (``WORST``);
    ties go to the smaller room id, so the list is the same on every run.
    """
    return table("worst_rooms", top(rooms_table, WORST, ["date"], top_n, ["room_id", "platform", "mode"]))


def dates(frame: pa.Table) -> list[dt.date]:
    """The days ``frame`` has rows of, in order."""
    days: list[dt.date] = pc.unique(frame["date"]).to_pylist()
    return sorted(days)
