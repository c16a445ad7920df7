"""Trends over the last nights: the tables earlier runs wrote (``platforms``, ``rooms``), read back on the driver."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from inturn_reports.transform.small import WORST, grouped, top


@dataclass(frozen=True)
class TrendParams:
    """Which nights the trends cover: ``nights`` days up to and including ``last``."""

    last: dt.date
    nights: int = 7
    top_n: int = 10

    @property
    def first(self) -> dt.date:
        """The earliest night covered."""
        return self.last - dt.timedelta(days=self.nights - 1)

    @classmethod
    def ending_before(cls, to_ms: int, nights: int, top_n: int) -> TrendParams:
        """The nights up to the day of the range's last millisecond (``to_ms`` is exclusive)."""
        last = dt.datetime.fromtimestamp((to_ms - 1) / 1000, dt.UTC).date()
        return cls(last=last, nights=nights, top_n=top_n)


def _in_nights(frame: pa.Table, params: TrendParams) -> pa.Table:
    day = frame["date"]
    return frame.filter(pc.and_(pc.greater_equal(day, params.first), pc.less_equal(day, params.last)))


#: The ``platforms`` columns the trend charts show.
NIGHTLY = ("date", "platform", "messages", "delivered_rate", "out_of_order_rate", "ack_timeouts", "e2e_p99_ms")


def nightly(platform_rows: pa.Table, params: TrendParams) -> pa.Table:
    """The ``platforms`` rows of the covered nights: one per night and platform."""
    return _in_nights(platform_rows, params).select(list(NIGHTLY))


#: The ``rooms`` counts summed over the nights.
SUMMED = ("messages", "pairs", "inverted", "ack_timeouts")
#: Out-of-order rate and ack timeouts: the per-night latency has no meaning summed over nights.
_MEASURES = WORST[:2]


def worst_rooms_of_the_nights(room_rows: pa.Table, params: TrendParams) -> list[dict[str, Any]]:
    """The ``top_n`` rooms over all covered nights together, by out-of-order rate and by ack timeouts.

    A room's figures are summed over its nights (rate = inverted / pairs of the sum); only rooms
    whose measure is above 0 take part (a room whose platform cannot order its messages has no pairs, so no rate);
    ties to the smaller room id.
    The rows are in the order the page lists them: by measure, then rank.
    """
    keys = ["room_id", "platform", "mode"]
    # One row per (date, room_id, platform, mode) in ``rooms`` (its key; a run replaces whole days), so counting
    # rows counts the nights.
    per_room = grouped(_in_nights(room_rows, params), keys, {"date": "count", **dict.fromkeys(SUMMED, "sum")})
    per_room = per_room.rename_columns(["nights" if name == "date" else name for name in per_room.column_names])
    with_pairs = pc.greater(per_room["pairs"], 0)
    rate = pc.if_else(with_pairs, pc.divide(pc.cast(per_room["inverted"], pa.float64()), per_room["pairs"]), None)
    per_room = per_room.append_column("out_of_order_rate", rate)
    rows = top(per_room, _MEASURES, [], params.top_n, [*keys, "nights", "messages"])
    return sorted(rows, key=lambda r: (r["measure"], r["rank"]))
