"""The report's pure transforms: frames in, frames out, no I/O.

``message_facts`` turns events and acks into one row per message; every report table is a
transform of those facts (``summary``, ``rooms``, ``worst_rooms``, ``timeline``,
``latency_histogram``). What each column means is written in docs/reports.md.
"""

from inturn_reports.transform.facts import ReportParams, message_facts
from inturn_reports.transform.tables import (
    FACT_COLUMNS,
    LATENCY_EDGES_MS,
    latency_histogram,
    rooms,
    summary,
    timeline,
    worst_rooms,
)

__all__ = [
    "FACT_COLUMNS",
    "LATENCY_EDGES_MS",
    "ReportParams",
    "latency_histogram",
    "message_facts",
    "rooms",
    "summary",
    "timeline",
    "worst_rooms",
]
