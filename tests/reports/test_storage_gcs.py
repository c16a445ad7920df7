"""The report on Google Cloud Storage: input, tables, manifests, page and trends through ``gs://`` (Google's Hadoop
connector for Spark's reads, pyarrow's GcsFileSystem for the driver's writes) on a local GCS server
(fake-gcs-server, gcs_server.py: a real HTTP server on a loopback port, started here; skipped when not built)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from inturn.schemas import encode
from inturn_reports.job import output_store, run, trends
from inturn_reports.load import RUNS, read_table
from inturn_reports.settings import ReportSettings
from inturn_reports.transform import TrendParams
from tests.reports import oracle
from tests.reports.conftest import needs_connector
from tests.reports.gcs_server import GcsServer, gcs_server
from tests.reports.generator import generate

# The timeout: a run of the job against the server, on a loaded machine.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200), needs_connector("gs")]

DAY = 86_400_000
FIRST_NIGHT = 1_790_985_600_000  # 2026-10-03 00:00 UTC
GRACE = 3_600_000
BUCKET = "inturn-reports-gcs"
OUT = f"gs://{BUCKET}/nightly"


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsServer]:
    with gcs_server(tmp_path_factory.mktemp("gcs")) as server:
        server.create_bucket(BUCKET)
        yield server


def _date(day: int) -> dt.date:
    return dt.date(2026, 10, 3) + dt.timedelta(days=day)


def test_three_nights_are_written_to_gs_and_read_back_with_trends_over_them(
    spark: SparkSession, gcs: GcsServer
) -> None:
    streams = [generate(seed=700 + d, rooms=10, messages_per_room=4, start_ms=FIRST_NIGHT + d * DAY + 3_600_000,
                        span_ms=18 * 3_600_000) for d in range(3)]  # fmt: skip
    events = [e for s in streams for e in s.events]
    acks = [a for s in streams for a in s.acks]
    for name, records in (("events", events), ("acks", acks)):
        gcs.put(BUCKET, f"export/{name}/part-0.json", b"\n".join(encode(r) for r in records) + b"\n")
    settings = ReportSettings(report_source="files", report_input_dir=f"gs://{BUCKET}/export", report_out_dir=OUT,
                              report_gcs_endpoint=gcs.endpoint, report_gcs_anonymous=True, report_top_n=4,
                              report_nights=3, report_grace_ms=GRACE)  # fmt: skip
    # One run (the connector's path is what is tested here; test_storage.py publishes nights of several runs).
    ranges = [(FIRST_NIGHT, FIRST_NIGHT + 3 * DAY)]
    runs = [run(spark, settings, start, end) for start, end in ranges]

    days = [_date(d) for d in range(3)]
    assert [r.nights for r in runs] == [tuple(d.isoformat() for d in days)]
    assert gcs.object_names(BUCKET, "nightly/_nights/") == [f"nightly/_nights/{d.isoformat()}.json" for d in days]
    for result in runs:
        assert result.out_dir == OUT
        assert result.cleanup_error == ""
        for night in result.nights:
            assert json.loads(gcs.get(BUCKET, f"nightly/_nights/{night}.json"))["run"] == result.run_id
            staged = gcs.object_names(BUCKET, f"nightly/{RUNS}/{result.run_id}/platforms/date={night}/")
            assert any(name.endswith(".parquet") for name in staged), staged
    # What the oracle computes from the records each run read, night by night.
    msgs = oracle.by_night(events, acks, ranges, GRACE)
    want = sorted((r["date"], r["platform"], r["messages"], r["ack_timeouts"])
                  for day_msgs in msgs.values() for r in oracle.platforms(day_msgs))  # fmt: skip
    store = output_store(settings)
    got = read_table(store, "platforms", days[0], days[-1]).to_pylist()
    assert sorted((r["date"], r["platform"], r["messages"], r["ack_timeouts"]) for r in got) == want
    drawn = trends(store, TrendParams.ending_before(ranges[-1][1], 3, 4))
    assert sorted((r["date"], r["platform"], r["messages"], r["ack_timeouts"]) for r in drawn.nightly) == want
    # The page and summary.csv of the run are objects in the bucket.
    assert runs[-1].html == f"{OUT}/report.html"
    assert days[0].isoformat() in gcs.get(BUCKET, "nightly/report.html").decode()
    rows = list(csv.DictReader(io.StringIO(gcs.get(BUCKET, "nightly/summary.csv").decode())))
    every = [m for day_msgs in msgs.values() for m in day_msgs]
    assert sorted((r["date"], r["platform"], r["mode"], int(r["messages"])) for r in rows) == sorted(
        (r["date"].isoformat(), r["platform"], r["mode"], r["messages"]) for r in oracle.summary(every)
    )
