"""The report's pure transforms: frames in, frames out, no I/O.

``message_facts`` turns events and acks into one row per message; every report table is a
transform of those facts in their narrow ``outcomes`` form (``rooms``, ``worst_rooms``), or of
their ``counted`` form (``summary``, ``timeline``, ``latency_histogram``, ``platforms``).
``trends`` reads the tables of the last nights back (``nightly``, ``worst_rooms_of_the_nights``).
What each column means is written in docs/reports.md.
"""

from inturn_reports.transform.facts import ReportParams, message_facts
from inturn_reports.transform.outcomes import OUTCOME_COLUMNS, OUTCOMES, outcomes
from inturn_reports.transform.tables import (
    LATENCY_EDGES_MS,
    Counted,
    counted,
    latency_histogram,
    platforms,
    rooms,
    summary,
    timeline,
    worst_rooms,
)
from inturn_reports.transform.trends import TrendParams, nightly, worst_rooms_of_the_nights

__all__ = [
    "LATENCY_EDGES_MS",
    "OUTCOMES",
    "OUTCOME_COLUMNS",
    "Counted",
    "ReportParams",
    "TrendParams",
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
