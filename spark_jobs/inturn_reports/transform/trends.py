"""Trends over the last nights: transforms of the tables earlier runs wrote (``platforms``, ``rooms``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F


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


def _in_nights(frame: DataFrame, params: TrendParams) -> DataFrame:
    return frame.where(F.col("date").between(F.lit(params.first), F.lit(params.last)))


def nightly(platform_rows: DataFrame, params: TrendParams) -> DataFrame:
    """The ``platforms`` rows of the covered nights: one per night and platform."""
    return _in_nights(platform_rows, params).select(
        "date", "platform", "messages", "delivered_rate", "out_of_order_rate", "ack_timeouts", "e2e_p99_ms"
    )


def _n(column: str) -> Column:
    return F.sum(column).cast("long").alias(column)


def worst_rooms_of_the_nights(room_rows: DataFrame, params: TrendParams) -> DataFrame:
    """The ``top_n`` rooms over all covered nights together, by out-of-order rate and by ack timeouts.

    A room's figures are summed over its nights (rate = inverted / pairs of the sum); only rooms
    where the measure means something take part (pairs > 0, timeouts > 0); ties to the smaller room id.
    """
    per_room = (
        _in_nights(room_rows, params)
        .groupBy("room_id", "platform", "mode")
        .agg(
            # One row per (date, room_id, platform, mode) in ``rooms`` (its grouping key; a run replaces whole
            # days), so counting rows counts the nights: no distinct aggregation (an Expand and two more stages).
            F.count(F.lit(1)).alias("nights"),
            _n("messages"),
            _n("pairs"),
            _n("inverted"),
            _n("ack_timeouts"),
        )
        .withColumn("out_of_order_rate", F.col("inverted") / F.col("pairs"))
    )
    measures = [("out_of_order_rate", F.col("pairs") > 0), ("ack_timeouts", F.col("ack_timeouts") > 0)]
    ranked = [
        per_room.where(where).select(
            F.lit(measure).alias("measure"),
            "room_id",
            "platform",
            "mode",
            "nights",
            "messages",
            F.col(measure).cast("double").alias("value"),
        )
        for measure, where in measures
    ]
    order = Window.partitionBy("measure").orderBy(F.col("value").desc(), F.col("room_id"))
    return (
        reduce(DataFrame.unionByName, ranked)
        .withColumn("rank", F.row_number().over(order))
        .where(F.col("rank") <= params.top_n)
        .select("measure", "rank", "room_id", "platform", "mode", "nights", "messages", "value")
    )
