"""Trends: four nightly runs into one output folder; the last page charts the last three nights, checked in Chromium."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from inturn.schemas import encode
from inturn_reports.job import ReportRun, run
from inturn_reports.load import read_table
from inturn_reports.settings import ReportSettings
from inturn_reports.storage import ObjectStore, local_path
from tests.reports import oracle
from tests.reports.browser import HAS_CHROMIUM, bars, rendered_page, table_rows
from tests.reports.generator import Stream, generate

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]  # four whole runs of the job

DAY = 86_400_000
FIRST_NIGHT = 1_790_121_600_000  # 2026-09-23 00:00 UTC
NIGHTS = 4  # the page covers the last 3: the first night is there to be left out
GRACE = 3_600_000


@dataclass
class Nights:
    last_run: ReportRun
    #: night -> the oracle's messages of that night's run
    msgs: dict[dt.date, list[oracle.Msg]]


def _night(day: int) -> Stream:
    # Older nights were written with dispatched events, the later ones with the terminal event alone.
    return generate(seed=100 + day, rooms=18, messages_per_room=4, start_ms=FIRST_NIGHT + day * DAY + 3_600_000,
                    span_ms=18 * 3_600_000, dispatched_events=day < 2)  # fmt: skip


@pytest.fixture(scope="module")
def nights(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Nights:
    """Each night reported by its own run, as the CronJob does, into the same output folder."""
    root = tmp_path_factory.mktemp("trends")
    streams = [_night(day) for day in range(NIGHTS)]
    events = [e for s in streams for e in s.events]
    acks = [a for s in streams for a in s.acks]
    for name, records in (("events", events), ("acks", acks)):
        (root / "in" / name).mkdir(parents=True)
        (root / "in" / name / "part-0.json").write_bytes(b"\n".join(encode(r) for r in records) + b"\n")
    settings = ReportSettings(report_source="files", report_input_dir=root / "in", report_out_dir=root / "out",
                              report_top_n=4, report_nights=NIGHTS - 1, report_grace_ms=GRACE)  # fmt: skip
    msgs = {}
    for day in range(NIGHTS):
        start, end = FIRST_NIGHT + day * DAY, FIRST_NIGHT + (day + 1) * DAY
        result = run(spark, settings, start, end)
        # What that run read: records timed inside [start, end + grace).
        seen_events = [e for e in events if start <= e.ts_ms < end + GRACE]
        seen_acks = [a for a in acks if start <= a.received_at_ms < end + GRACE]
        msgs[dt.date(2026, 9, 23) + dt.timedelta(days=day)] = oracle.messages(seen_events, seen_acks, start, end)
    return Nights(result, msgs)


def test_each_nights_platform_figures_are_written_and_match_the_oracle(spark: SparkSession, nights: Nights) -> None:
    last = max(nights.msgs)
    store = ObjectStore(nights.last_run.out_dir)
    written = spark.createDataFrame(read_table(store, "platforms", min(nights.msgs), last))
    columns = ["date", "platform", "messages", "delivered_rate", "out_of_order_rate", "ack_timeouts", "e2e_p99_ms"]
    expected = [row for msgs in nights.msgs.values() for row in oracle.platforms(msgs)]
    assert len({r["date"] for r in expected}) == NIGHTS
    actual = written.select(*columns)
    assertDataFrameEqual(actual, spark.createDataFrame([tuple(r[c] for c in columns) for r in expected], actual.schema))


@pytest.mark.skipif(not HAS_CHROMIUM, reason="chromium is installed by scripts/setup-system.sh")
def test_the_page_charts_the_last_three_nights_per_platform_and_their_worst_rooms(
    nights: Nights, tmp_path: Path
) -> None:
    dom = rendered_page(Path(str(local_path(nights.last_run.html))), tmp_path / "trends.png")
    covered = sorted(nights.msgs)[1:]
    charts = ("out-of-order", "ack-timeouts", "delivered", "e2e-p99")
    want: dict[str, dict[tuple[str, str], float]] = {chart: {} for chart in charts}
    for night in covered:
        for row in oracle.platforms(nights.msgs[night]):
            cell = (night.isoformat(), row["platform"])
            # A platform that cannot report a figure is left out of its chart, not drawn as 0.
            if row["platform"] not in oracle.NO_ORDER:
                want["out-of-order"][cell] = 100 * (row["out_of_order_rate"] or 0.0)
            want["ack-timeouts"][cell] = row["ack_timeouts"]
            if row["platform"] not in oracle.NO_DELIVERY:
                want["delivered"][cell] = 100 * row["delivered_rate"]
            want["e2e-p99"][cell] = row["e2e_p99_ms"] or 0.0
    for chart, cells in want.items():
        got = {(b["category"], b["series"]): b["value"] for b in bars(dom, f"trend-{chart}")}
        assert got == pytest.approx(cells, rel=1e-5), chart
    assert any(v > 0 for v in want["out-of-order"].values())
    assert any(v > 0 for v in want["ack-timeouts"].values())
    week = [m for night in covered for m in nights.msgs[night]]
    worst = sorted(oracle.worst_rooms_of_the_nights(week, top_n=4), key=lambda r: (r["measure"], r["rank"]))
    expected = [(r["measure"], str(r["rank"]), r["room_id"], str(r["nights"])) for r in worst]
    got_rooms = [(cells[0], cells[1], cells[2], cells[5]) for cells in table_rows(dom, "worst-rooms-nights")]
    assert len(expected) == 8
    assert got_rooms == expected
