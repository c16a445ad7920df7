"""The report's pure transforms: frames in, frames out, no I/O.

``room_pass`` turns events and acks into the rooms table and the counts the small tables are summed from, in
one pass over each room (Spark shuffles the rows by room; ``arrow_pass`` computes each message's facts
and counts them); ``split`` makes Arrow tables of its rows on the driver. The small tables are summed from those
there (``small``: ``summary``, ``timeline``, ``latency_histogram``, ``platforms``, ``worst_rooms``), as are the
``trends`` over the tables of the last nights (``nightly``, ``worst_rooms_of_the_nights``). What each column
means is written in docs/reports.md.
"""

from inturn_reports.transform.facts import ReportParams, room_pass
from inturn_reports.transform.outcomes import LATENCY_EDGES_MS, MEASURES, OUTCOMES
from inturn_reports.transform.small import (
    SCHEMAS,
    CountedRows,
    conform,
    latency_histogram,
    platforms,
    summary,
    timeline,
    worst_rooms,
)
from inturn_reports.transform.tables import split
from inturn_reports.transform.trends import TrendParams, nightly, worst_rooms_of_the_nights

__all__ = [
    "LATENCY_EDGES_MS",
    "MEASURES",
    "OUTCOMES",
    "SCHEMAS",
    "CountedRows",
    "ReportParams",
    "TrendParams",
    "conform",
    "latency_histogram",
    "nightly",
    "platforms",
    "room_pass",
    "split",
    "summary",
    "timeline",
    "worst_rooms",
    "worst_rooms_of_the_nights",
]
