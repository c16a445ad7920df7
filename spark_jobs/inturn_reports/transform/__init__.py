"""The report's pure transforms: frames in, frames out, no I/O.

``message_facts`` turns events and acks into one row per message. Spark aggregates those facts, in their
narrow ``outcomes`` form, into the ``rooms`` table and their ``counted`` form; the small tables are summed
from those on the driver (``small``: ``summary``, ``timeline``, ``latency_histogram``, ``platforms``,
``worst_rooms``), as are the ``trends`` over the tables of the last nights (``nightly``,
``worst_rooms_of_the_nights``). What each column means is written in docs/reports.md.
"""

from inturn_reports.transform.facts import ReportParams, message_facts
from inturn_reports.transform.outcomes import OUTCOME_COLUMNS, OUTCOMES, outcomes
from inturn_reports.transform.small import (
    SCHEMAS,
    CountedRows,
    collect,
    conform,
    latency_histogram,
    platforms,
    summary,
    timeline,
    worst_rooms,
)
from inturn_reports.transform.tables import LATENCY_EDGES_MS, Counted, counted, rooms
from inturn_reports.transform.trends import TrendParams, nightly, worst_rooms_of_the_nights

__all__ = [
    "LATENCY_EDGES_MS",
    "OUTCOMES",
    "OUTCOME_COLUMNS",
    "SCHEMAS",
    "Counted",
    "CountedRows",
    "ReportParams",
    "TrendParams",
    "collect",
    "conform",
    "counted",
    "latency_histogram",
    "message_facts",
    "nightly",
    "outcomes",
    "platforms",
    "rooms",
    "summary",
    "timeline",
    "worst_rooms",
    "worst_rooms_of_the_nights",
]
