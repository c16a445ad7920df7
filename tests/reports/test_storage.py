"""The report on object storage: input, tables, manifests, page and trends through ``s3a://`` on a local S3-compatible
server (moto's server mode: a real HTTP server on a loopback port, started here), and a failed night that leaves the
published nights as they were."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import boto3  # type: ignore[import-untyped]  # boto3 ships no types
import pytest
from moto.server import ThreadedMotoServer
from pyspark.sql import SparkSession

from inturn.errors import InturnError
from inturn.schemas import encode
from inturn_devtools.process import free_port
from inturn_reports.job import ReportRun, run, s3_options, trends
from inturn_reports.load import NIGHTS as NIGHTS_FOLDER
from inturn_reports.load import RUNS, all_nights, new_run_id, read_table
from inturn_reports.settings import ReportSettings
from inturn_reports.storage import ObjectStore
from inturn_reports.transform import TrendParams
from tests.reports import oracle
from tests.reports.conftest import needs_connector
from tests.reports.generator import Stream, generate
from tests.reports.layouts import legacy_night

# The timeout: three runs of the job against the server, on a loaded machine.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800), needs_connector("s3a")]

DAY = 86_400_000
FIRST_NIGHT = 1_790_121_600_000  # 2026-09-23 00:00 UTC
NIGHTS = 3
GRACE = 3_600_000
BUCKET = "inturn-reports"
OUT = f"s3a://{BUCKET}/nightly"
REGION = "us-east-1"
FAILED_AGO_MS = 13 * 3_600_000  # a night that failed is older than the sweep's grace (12 h) by the next night


@dataclass
class S3:
    endpoint: str
    client: Any  # boto3's S3 client (boto3 ships no types)

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def get(self, key: str) -> bytes:
        body: bytes = self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        return body


@pytest.fixture(scope="module")
def s3(spark: SparkSession) -> Iterator[S3]:
    """moto's S3 server on a free loopback port, with one bucket; the session's s3a and pyarrow pointed at it."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request in the captured log
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    credentials = {"AWS_ACCESS_KEY_ID": "inturn-test", "AWS_SECRET_ACCESS_KEY": "inturn-test-secret"}
    with pytest.MonkeyPatch.context() as env:
        # pyarrow reads the AWS environment; the JVM was started before it was set, so Hadoop is told here.
        for key, value in {**credentials, "AWS_EC2_METADATA_DISABLED": "true"}.items():
            env.setenv(key, value)
        spark.conf.set("fs.s3a.access.key", credentials["AWS_ACCESS_KEY_ID"])
        spark.conf.set("fs.s3a.secret.key", credentials["AWS_SECRET_ACCESS_KEY"])
        client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION)
        client.create_bucket(Bucket=BUCKET)
        try:
            yield S3(endpoint, client)
        finally:
            spark.conf.unset("fs.s3a.access.key")
            spark.conf.unset("fs.s3a.secret.key")
            server.stop()


def _settings(s3: S3) -> ReportSettings:
    return ReportSettings(report_source="files", report_input_dir=f"s3a://{BUCKET}/export", report_out_dir=OUT,
                          report_s3_endpoint=s3.endpoint, report_s3_region=REGION, report_s3_path_style=True,
                          report_top_n=4, report_nights=NIGHTS, report_grace_ms=GRACE)  # fmt: skip


def _night(day: int) -> Stream:
    return generate(seed=300 + day, rooms=12, messages_per_room=4, start_ms=FIRST_NIGHT + day * DAY + 3_600_000,
                    span_ms=18 * 3_600_000)  # fmt: skip


def _range(day: int) -> tuple[int, int]:
    return FIRST_NIGHT + day * DAY, FIRST_NIGHT + (day + 1) * DAY


def _date(day: int) -> dt.date:
    return dt.date(2026, 9, 23) + dt.timedelta(days=day)


@dataclass
class Nights:
    runs: list[ReportRun]
    msgs: dict[dt.date, list[oracle.Msg]]
    store: ObjectStore


@pytest.fixture(scope="module")
def nights(spark: SparkSession, s3: S3) -> Nights:
    """Three nights from an export in the bucket into the bucket: the first two by one run, the third by the next (the
    trends read nights of both)."""
    streams = [_night(day) for day in range(NIGHTS + 1)]  # the last one is the night that fails
    events = [e for s in streams for e in s.events]
    acks = [a for s in streams for a in s.acks]
    for name, records in (("events", events), ("acks", acks)):
        body = b"\n".join(encode(r) for r in records) + b"\n"
        s3.client.put_object(Bucket=BUCKET, Key=f"export/{name}/part-0.json", Body=body)
    settings = _settings(s3)
    ranges = [(_range(0)[0], _range(1)[1]), _range(2)]
    runs = [run(spark, settings, start, end) for start, end in ranges]
    return Nights(runs, oracle.by_night(events, acks, ranges, GRACE), ObjectStore(OUT, s3_options(settings)))


def _platform_cells(rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["date"], r["platform"], r["messages"], r["ack_timeouts"]) for r in rows)


def _expected_platforms(nights: Nights) -> list[tuple[Any, ...]]:
    return _platform_cells([r for msgs in nights.msgs.values() for r in oracle.platforms(msgs)])


def test_three_nights_are_written_to_s3a_and_read_back_with_trends_over_them(
    spark: SparkSession, s3: S3, nights: Nights
) -> None:
    days = [_date(d) for d in range(NIGHTS)]
    # Each night published by its manifest, naming the run that wrote it; the tables staged under that run.
    assert s3.keys("nightly/_nights/") == [f"nightly/_nights/{d.isoformat()}.json" for d in days]
    assert [r.nights for r in nights.runs] == [(days[0].isoformat(), days[1].isoformat()), (days[2].isoformat(),)]
    for result in nights.runs:
        assert result.out_dir == OUT
        staged = s3.keys(f"nightly/{RUNS}/{result.run_id}/platforms/")
        for night in result.nights:
            assert any(k.endswith(".parquet") and f"date={night}/" in k for k in staged), staged
        for night in result.nights:
            manifest = json.loads(s3.get(f"nightly/_nights/{night}.json"))
            assert manifest["run"] == result.run_id
    # The tables read back through s3a hold the oracle's figures for every night.
    platforms = read_table(nights.store, "platforms", days[0], days[-1])
    assert _platform_cells(platforms.to_pylist()) == _expected_platforms(nights)
    assert len({r["date"] for r in platforms.to_pylist()}) == NIGHTS
    # The trends (as the last page drew them) read the three nights from the bucket.
    params = TrendParams.ending_before(_range(NIGHTS - 1)[1], NIGHTS, 4)
    drawn = trends(nights.store, params)
    assert _platform_cells(drawn.nightly) == _expected_platforms(nights)
    assert drawn.worst_rooms  # the worst rooms over the three nights, from the rooms tables of three runs
    week = [m for msgs in nights.msgs.values() for m in msgs]
    want_worst = oracle.worst_rooms_of_the_nights(week, top_n=4)
    assert sorted((r["measure"], r["rank"], r["room_id"]) for r in drawn.worst_rooms) == sorted(
        (r["measure"], r["rank"], r["room_id"]) for r in want_worst
    )
    # The page and the summary of the last run are objects in the bucket.
    last = nights.runs[-1]
    assert last.html == f"{OUT}/report.html"
    assert last.summary_csv == f"{OUT}/summary.csv"
    page = s3.get("nightly/report.html").decode()
    assert "<html" in page.lower()
    assert days[0].isoformat() in page
    rows = list(csv.DictReader(io.StringIO(s3.get("nightly/summary.csv").decode())))
    want = oracle.summary(nights.msgs[days[-1]])
    assert sorted((r["platform"], r["mode"], int(r["messages"])) for r in rows) == sorted(
        (r["platform"], r["mode"], r["messages"]) for r in want
    )


class _Killed(RuntimeError):
    """Stands for the run dying half-way through writing its tables."""


def test_a_night_that_fails_mid_write_leaves_the_published_nights_and_their_trends_as_they_were(
    spark: SparkSession, s3: S3, nights: Nights, monkeypatch: pytest.MonkeyPatch
) -> None:
    days = [_date(d) for d in range(NIGHTS)]
    manifests = {k: s3.get(k) for k in s3.keys("nightly/_nights/")}
    page, summary = s3.get("nightly/report.html"), s3.get("nightly/summary.csv")
    # The trends as the next night's page would draw them: the failed night's own, and the three before it.
    params = TrendParams.ending_before(_range(NIGHTS)[1], NIGHTS + 1, 4)
    before = trends(nights.store, params)
    staged_before = set(s3.keys(f"nightly/{RUNS}/"))

    # A run over the last published night and the next one dies after two of its six tables reached the bucket.
    written: list[str] = []
    real_write = ObjectStore.write

    def write(self: ObjectStore, key: str, data: bytes) -> str:
        table = key.split("/")[2] if key.startswith(f"{RUNS}/") else key
        if table not in written and len(written) == 2:
            raise _Killed(f"killed before writing {key}")
        if table not in written:
            written.append(table)
        return real_write(self, key, data)

    monkeypatch.setattr(ObjectStore, "write", write)
    # The run failed last night: it started longer ago than the sweep's grace (the next test's good night sweeps it).
    monkeypatch.setattr("inturn_reports.job.new_run_id", lambda: new_run_id(int(time.time() * 1000) - FAILED_AGO_MS))
    start, end = _range(NIGHTS - 1)[0], _range(NIGHTS)[1]
    with pytest.raises((_Killed, InturnError)):
        run(spark, _settings(s3), start, end)
    monkeypatch.undo()

    # It did write: its first two tables are in the bucket, under a run of its own.
    new = set(s3.keys(f"nightly/{RUNS}/")) - staged_before
    assert len(written) == 2
    assert any(k.endswith(".parquet") for k in new), sorted(new)
    assert {k.split("/")[3] for k in new} == set(written)
    # Nothing of it was published: the same manifests, byte for byte (the last night still names its old run); no
    # manifest for the new night; the page and summary of the last good run.
    assert {k: s3.get(k) for k in s3.keys("nightly/_nights/")} == manifests
    assert (s3.get("nightly/report.html"), s3.get("nightly/summary.csv")) == (page, summary)
    # Every earlier night reads back whole, and the trends are the same rows as before the failure.
    platforms = read_table(nights.store, "platforms", days[0], _date(NIGHTS))
    assert _platform_cells(platforms.to_pylist()) == _expected_platforms(nights)
    after = trends(nights.store, params)
    assert _platform_cells(after.nightly) == _platform_cells(before.nightly) == _expected_platforms(nights)
    assert list(after.worst_rooms) == list(before.worst_rooms)


def _run_folders(s3: S3) -> set[str]:
    """The runs with objects under runs/ (pyarrow leaves an empty ``runs/`` marker where it deleted the last one)."""
    return {k.split("/")[2] for k in s3.keys(f"nightly/{RUNS}/") if not k.endswith("/")}


def test_the_next_good_night_sweeps_the_failed_runs_adopts_the_earlier_layout_and_keeps_every_night(
    spark: SparkSession, s3: S3, nights: Nights
) -> None:
    store = nights.store
    published_runs = {n.run for n in all_nights(store)}
    # Leftovers no manifest names: a run that died before publishing, 13 h ago (and the killed run of the test
    # above, when it ran); and a run that started a minute ago and is still writing, within the grace.
    dead = new_run_id(int(time.time() * 1000) - FAILED_AGO_MS)
    writing = new_run_id(int(time.time() * 1000) - 60_000)
    for run_id in (dead, writing):
        s3.client.put_object(Bucket=BUCKET, Key=f"nightly/{RUNS}/{run_id}/rooms/date=2026-09-26/part-0.parquet",
                             Body=b"half")  # fmt: skip
    staged = _run_folders(s3)
    unpublished = staged - published_runs
    assert {dead, writing} <= unpublished
    # A night the report wrote before manifests (2026-09-22, the day before the first), straight under the output.
    old_night = _date(-1)
    legacy_night(store, old_night, mark=777)

    result = run(spark, _settings(s3).model_copy(update={"report_nights": NIGHTS + 2}), *_range(NIGHTS))

    assert result.nights == (_date(NIGHTS).isoformat(),)
    assert result.adopted == (old_night.isoformat(),)
    assert result.cleanup_error == ""
    gone = unpublished - {writing}  # the dead run, and the killed one above: both 13 h old
    assert sorted(result.cleanup.runs) == sorted(gone)
    left = _run_folders(s3)
    assert left == (staged - gone) | {result.run_id}
    # Every night published before is still read, the new one and the adopted one beside them.
    days = [old_night, *(_date(d) for d in range(NIGHTS + 1))]
    assert s3.keys(f"nightly/{NIGHTS_FOLDER}/") == [f"nightly/{NIGHTS_FOLDER}/{d.isoformat()}.json" for d in days]
    platforms = read_table(store, "platforms", days[1], days[NIGHTS])
    assert _platform_cells(platforms.to_pylist()) == _expected_platforms(nights)
    drawn = trends(store, TrendParams.ending_before(_range(NIGHTS)[1], NIGHTS + 2, 4))
    assert {r["date"] for r in drawn.nightly} == set(days)
    assert [(r["platform"], r["messages"]) for r in drawn.nightly if r["date"] == old_night] == [("whatsapp", 777)]
    assert old_night.isoformat() in s3.get("nightly/report.html").decode()
