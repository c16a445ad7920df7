"""The report tables as the pass over the rooms gives them (``facts.room_pass``), on the driver: the rooms table,
and the two counts every small table is summed from (``small``)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from inturn_reports.transform.measurable import not_measurable
from inturn_reports.transform.outcomes import MEASURES, OUTCOMES
from inturn_reports.transform.small import ROOM_COUNTS, CountedRows, conform, grouped

#: The kinds of the pass's rows (``arrow_pass.ROOM``, ``CELL``, ``LATENCY``).
ROOM, CELL, LATENCY = 0, 1, 2


#: What a room's or a cell's ``counts`` hold, in order.
COUNTS = ("messages", *OUTCOMES, "retries")


def _counts(rows: pa.Table, names: Sequence[str]) -> dict[str, pa.Array]:
    """The counts of ``names`` (of ``COUNTS``) of ``rows`` as columns."""
    return {name: pc.list_element(rows["counts"], COUNTS.index(name)) for name in names}


def split(passed: pa.Table) -> tuple[pa.Table, CountedRows]:
    """The rooms table and the counts from the pass's rows (``room_pass(...).toArrow()``).

    A room's rows are whole (its events and acks are all in one task's partition); each task counted the cells and
    latency values of its own rooms, so those are summed here:

    ``cells``: per day, platform, mode and timeline bucket, ``messages``, the count of every one of ``OUTCOMES`` and
    ``retries``. ``latencies``: per day, platform, mode, measure ('ack', 'e2e') and latency value, how many
    messages had it; the exact percentiles are taken from these counts (``small.percentiles``).
    """
    kind = passed["kind"]
    keys = ["date", "platform", "mode"]
    rooms = passed.filter(pc.equal(kind, ROOM))
    counts = _counts(rooms, ["messages", *ROOM_COUNTS])
    # A room whose platform cannot order its messages has no pairs and no rate, but the reason (``measurable``).
    notes = pa.array([not_measurable(p, "out_of_order") for p in rooms["platform"].to_pylist()], pa.string())
    measurable = pc.is_null(notes)
    for name in ("pairs", "inverted"):
        counts[name] = pc.if_else(measurable, counts[name], None)
    pairs = counts["pairs"].cast(pa.float64())
    rate = pc.if_else(pc.greater(pairs, 0), pc.divide(counts["inverted"].cast(pa.float64()), pairs), None)
    rooms = conform("rooms", pa.table({**{k: rooms[k] for k in ("date", "room_id", "platform", "mode")}, **counts,
                                        "e2e_p95_ms": rooms["e2e_p95_ms"], "out_of_order_rate": rate,
                                        "out_of_order_note": notes}))  # fmt: skip
    cell_rows = passed.filter(pc.equal(kind, CELL))
    cells = pa.table({**{k: cell_rows[k] for k in keys}, "bucket_start_ms": cell_rows["key"],
                      **_counts(cell_rows, COUNTS)})  # fmt: skip
    cells = grouped(cells, [*keys, "bucket_start_ms"], dict.fromkeys(COUNTS, "sum"))
    groups = passed.filter(pc.equal(kind, LATENCY))
    # Each group's values and counts, one row each, beside the group's keys.
    of_value = pc.list_parent_indices(groups["values"])
    values = pa.table(
        {
            **{k: groups[k].take(of_value) for k in keys},
            "measure": pc.take(pa.array(MEASURES), groups["key"].take(of_value)),
            "ms": pc.list_flatten(groups["values"]),
            "messages": pc.list_flatten(groups["counts"]),
        }
    )
    latencies = grouped(values, [*keys, "measure", "ms"], {"messages": "sum"})
    return rooms, CountedRows(cells, latencies)
