"""The output location over months of nights, without Spark (the tables are small Arrow tables written as a run
writes them): a failed night's leftovers and replaced runs swept after the grace, retention, and the nights of the
layout before manifests adopted. Each test on a local folder (file://), on a local S3-compatible server (moto's
server mode: a real HTTP server on a loopback port, started here) and on a local GCS server (fake-gcs-server,
gcs_server.py: skipped when it is not built)."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3  # type: ignore[import-untyped]  # boto3 ships no types
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from moto.server import ThreadedMotoServer
from structlog.testing import capture_logs

from inturn.errors import ConfigError
from inturn.settings import load
from inturn_devtools.process import free_port
from inturn_reports import cleanup, legacy
from inturn_reports.job import sweep_output
from inturn_reports.load import NIGHTS, RUNS, ReportLoadError, publish, read_table, write_tables
from inturn_reports.settings import ReportSettings
from inturn_reports.storage import GcsOptions, ObjectStore, S3Options, hadoop_conf, to_uri
from inturn_reports.transform import SCHEMAS
from tests.reports.gcs_server import gcs_server
from tests.reports.layouts import legacy_night, row_value

BUCKET = "inturn-retention"
REGION = "us-east-1"
GRACE = dt.timedelta(hours=12)
D0 = dt.date(2026, 9, 1)


def _day(n: int) -> dt.date:
    return D0 + dt.timedelta(days=n)


def _at(n: int, hour: int = 3) -> dt.datetime:
    """``hour`` o'clock UTC on the morning after night ``n`` (when the nightly run of night ``n`` starts)."""
    return dt.datetime.combine(_day(n + 1), dt.time(hour), dt.UTC)


def _run_id(start: dt.datetime) -> str:
    return f"{start:%Y%m%dT%H%M%S}Z-{uuid.uuid4().hex[:8]}"


def _tables(days: list[dt.date], mark: int) -> dict[str, pa.Table]:
    """One row per night in each of the report's tables; ``messages`` = ``mark``."""
    return {
        name: pa.Table.from_pylist([{f.name: row_value(f, d, mark) for f in schema} for d in days], schema)
        for name, schema in SCHEMAS.items()
    }


def _good_run(store: ObjectStore, days: list[dt.date], mark: int, start: dt.datetime) -> str:
    """What a good night leaves: its tables staged under its run, then its nights published."""
    run = _run_id(start)
    tables = _tables(days, mark)
    write_tables(store, tables, run)
    publish(store, run, tables, 0, 1)
    return run


def _failed_run(store: ObjectStore, days: list[dt.date], mark: int, start: dt.datetime) -> str:
    """What a run that died half-way leaves: two of its tables staged, nothing published."""
    run = _run_id(start)
    write_tables(store, dict(list(_tables(days, mark).items())[:2]), run)
    return run


def _read(store: ObjectStore, first: int, last: int) -> dict[dt.date, int]:
    """The ``messages`` each published night ``first``..``last`` of the platforms table holds."""
    rows = read_table(store, "platforms", _day(first), _day(last), ["messages"]).to_pylist()
    assert len({r["date"] for r in rows}) == len(rows), rows  # one row a night: no night read twice
    return {r["date"]: r["messages"] for r in rows}


def _runs(store: ObjectStore) -> set[str]:
    return {k.split("/")[1] for k in store.keys(RUNS)}


def _manifests(store: ObjectStore) -> list[str]:
    return [k.removeprefix(f"{NIGHTS}/").removesuffix(".json") for k in store.keys(NIGHTS)]


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on a free loopback port with one bucket; pyarrow reads the credentials from the
    environment."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as env:
        for key, value in {"AWS_ACCESS_KEY_ID": "inturn-test", "AWS_SECRET_ACCESS_KEY": "inturn-test-secret",
                           "AWS_EC2_METADATA_DISABLED": "true"}.items():  # fmt: skip
            env.setenv(key, value)
        boto3.client("s3", endpoint_url=endpoint, region_name=REGION).create_bucket(Bucket=BUCKET)
        try:
            yield endpoint
        finally:
            server.stop()


@pytest.fixture(scope="module")
def gcs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """fake-gcs-server on a free loopback port with one bucket (the test skips when it is not built)."""
    with gcs_server(tmp_path_factory.mktemp("gcs")) as server:
        server.create_bucket(BUCKET)
        yield server.endpoint


@pytest.fixture(params=["file", "s3a", "gs"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ObjectStore:
    """An empty output location: a local folder, or a prefix of its own in the S3 or the GCS server's bucket."""
    if request.param == "file":
        return ObjectStore(to_uri(tmp_path_factory.mktemp("out")))
    prefix = f"{BUCKET}/{uuid.uuid4().hex}"
    if request.param == "gs":
        return ObjectStore(f"gs://{prefix}", gcs=GcsOptions(request.getfixturevalue("gcs_endpoint"), anonymous=True))
    endpoint = request.getfixturevalue("s3_endpoint")
    return ObjectStore(f"s3a://{prefix}", S3Options(endpoint, REGION, path_style=True))


def _sweep(store: ObjectStore, now: dt.datetime, keep_days: int = 0, keep: str = "") -> cleanup.Cleanup:
    return cleanup.sweep(store, keep_days=keep_days, grace=GRACE, now=now, keep_runs={keep} if keep else set())


def test_a_failed_nights_leftovers_are_removed_by_the_next_good_night_after_the_grace(store: ObjectStore) -> None:
    first = _good_run(store, [_day(0), _day(1)], mark=1, start=_at(1))
    second = _good_run(store, [_day(2)], mark=2, start=_at(2))
    failed = _failed_run(store, [_day(2), _day(3)], mark=3, start=_at(3))
    leftovers = store.keys(f"{RUNS}/{failed}")
    assert any(k.endswith(".parquet") for k in leftovers), leftovers

    # Swept while the failed run may still be writing (1 h after it started, within the grace): nothing is deleted.
    assert _sweep(store, _at(3, hour=4)) == cleanup.Cleanup()
    assert store.keys(f"{RUNS}/{failed}") == leftovers

    # The next good night, a day later: the failed run's folder goes, every published night stays readable.
    third = _good_run(store, [_day(3)], mark=4, start=_at(4))
    swept = _sweep(store, _at(4, hour=4), keep=third)
    assert swept == cleanup.Cleanup(runs=(failed,))
    assert store.keys(f"{RUNS}/{failed}") == []
    assert _runs(store) == {first, second, third}
    assert _manifests(store) == [_day(n).isoformat() for n in range(4)]
    assert _read(store, 0, 3) == {_day(0): 1, _day(1): 1, _day(2): 2, _day(3): 4}


def test_a_night_run_again_leaves_no_replaced_tables_and_the_other_nights_of_the_old_run_stay(
    store: ObjectStore,
) -> None:
    old = _good_run(store, [_day(0), _day(1)], mark=1, start=_at(1))
    again = _good_run(store, [_day(1)], mark=2, start=_at(1, hour=9))
    # Within the grace of the run again: nothing is deleted, though night 1 of the old run is no longer read.
    assert _sweep(store, _at(1, hour=10)) == cleanup.Cleanup()

    swept = _sweep(store, _at(2))
    # The old run still publishes night 0: only its night-1 folders go (one per table).
    assert swept.runs == ()
    assert sorted(swept.folders) == sorted(f"{RUNS}/{old}/{name}/date={_day(1)}" for name in SCHEMAS)
    assert not [k for k in store.keys(f"{RUNS}/{old}") if f"date={_day(1)}" in k]
    assert _read(store, 0, 1) == {_day(0): 1, _day(1): 2}

    # Both nights run again: nothing of the old run is named any more, so its folder goes whole.
    newest = _good_run(store, [_day(0), _day(1)], mark=3, start=_at(2))
    swept = _sweep(store, _at(3))
    assert swept.runs == (old, again)
    assert _runs(store) == {newest}
    assert _read(store, 0, 1) == {_day(0): 3, _day(1): 3}


def test_retention_unpublishes_and_deletes_only_the_nights_past_it(store: ObjectStore) -> None:
    runs = [_good_run(store, [_day(n)], mark=10 + n, start=_at(n)) for n in range(5)]
    both = _good_run(store, [_day(5), _day(8)], mark=99, start=_at(8))  # one run holding an old and a new night
    now = _at(8)  # 2026-09-10 03:00 UTC; the latest night is 2026-09-09

    assert _sweep(store, now + dt.timedelta(days=3650), keep_days=0) == cleanup.Cleanup()  # 0 keeps every night
    assert len(_manifests(store)) == 7

    # Keep 4 days: the nights before 2026-09-05 (nights 0-3) go, manifest and tables; nights 4, 5 and 8 stay.
    swept = _sweep(store, now, keep_days=4)
    assert swept.expired == tuple(_day(n).isoformat() for n in range(4))
    assert swept.runs == tuple(runs[:4])  # what was left of them (their _SUCCESS markers) once unnamed
    assert _manifests(store) == [_day(n).isoformat() for n in (4, 5, 8)]
    assert _runs(store) == {runs[4], both}
    assert _read(store, 0, 8) == {_day(4): 14, _day(5): 99, _day(8): 99}

    # Days pass without a new night: the count is from the latest night reported, so nothing more goes.
    assert _sweep(store, now + dt.timedelta(days=30), keep_days=4) == cleanup.Cleanup()

    # Night 10 reported: nights 4 and 5 are past it; the run holding nights 5 and 8 keeps only night 8's folders.
    newest = _good_run(store, [_day(10)], mark=7, start=_at(10))
    swept = _sweep(store, _at(11), keep_days=4)
    assert swept.expired == (_day(4).isoformat(), _day(5).isoformat())
    assert _manifests(store) == [_day(8).isoformat(), _day(10).isoformat()]
    assert _runs(store) == {both, newest}
    assert not [k for k in store.keys(f"{RUNS}/{both}") if f"date={_day(5)}" in k]
    assert _read(store, 0, 10) == {_day(8): 99, _day(10): 7}


def test_a_night_dated_after_today_does_not_expire_the_others(store: ObjectStore) -> None:
    _good_run(store, [_day(0), _day(1), _day(2)], mark=1, start=_at(2))
    _good_run(store, [_day(900)], mark=2, start=_at(2, hour=5))  # records dated years ahead
    assert _sweep(store, _at(2, hour=6), keep_days=5) == cleanup.Cleanup()
    assert _read(store, 0, 900) == {_day(0): 1, _day(1): 1, _day(2): 1, _day(900): 2}


def test_retention_never_expires_the_nights_the_sweeping_run_just_published(store: ObjectStore) -> None:
    recent = _good_run(store, [_day(399)], mark=2, start=_at(399))
    backfill = _good_run(store, [_day(0)], mark=1, start=_at(400))  # a night re-run long after
    assert _sweep(store, _at(400, hour=4), keep_days=30, keep=backfill) == cleanup.Cleanup()
    assert _read(store, 0, 399) == {_day(0): 1, _day(399): 2}
    # The next night's sweep expires it.
    swept = _sweep(store, _at(401), keep_days=30)
    assert swept.expired == (_day(0).isoformat(),)
    assert _runs(store) == {recent}


def test_a_manifest_of_a_later_format_stops_the_sweep(store: ObjectStore) -> None:
    failed = _failed_run(store, [_day(1)], mark=1, start=_at(1))
    store.write(f"{NIGHTS}/{_day(0)}.json", b'{"format": 99, "date": "2026-09-01", "run": "r", "tables": {}}')
    with pytest.raises(ReportLoadError, match="later manifest format"):
        _sweep(store, _at(5), keep_days=1)
    assert _runs(store) == {failed}


def _legacy_keys(store: ObjectStore, day: dt.date) -> list[str]:
    return [k for name in SCHEMAS for k in store.keys(f"{name}/date={day.isoformat()}")]


def test_the_nights_of_the_layout_before_manifests_are_adopted_read_replaced_and_expired(store: ObjectStore) -> None:
    for n in range(3):
        legacy_night(store, _day(n), mark=100 + n)
    current = _good_run(store, [_day(3)], mark=3, start=_at(3))
    assert _read(store, 0, 3) == {_day(3): 3}  # not read before they are adopted
    # An adopted layout is swept like any other, and before adoption its folders are never touched.
    assert _sweep(store, _at(10)).folders == ()
    assert all(_legacy_keys(store, _day(n)) for n in range(3))

    assert legacy.adopt(store, dry_run=True) == [_day(0), _day(1), _day(2)]
    assert _manifests(store) == [_day(3).isoformat()]  # a dry run writes nothing
    assert legacy.adopt(store) == [_day(0), _day(1), _day(2)]
    assert legacy.adopt(store) == []  # once
    assert _read(store, 0, 3) == {_day(0): 100, _day(1): 101, _day(2): 102, _day(3): 3}
    assert read_table(store, "rooms", _day(0), _day(2), ["room_id"]).column("room_id").to_pylist() == ["room-1"] * 3

    # Night 1 run again in the new layout: its old folders go once the sweep runs; nights 0 and 2 stay.
    again = _good_run(store, [_day(1)], mark=7, start=_at(4))
    swept = _sweep(store, _at(5), keep=again)
    assert sorted(swept.folders) == sorted(f"{name}/date={_day(1)}" for name in SCHEMAS)
    assert _legacy_keys(store, _day(1)) == []
    assert _read(store, 0, 3) == {_day(0): 100, _day(1): 7, _day(2): 102, _day(3): 3}

    # Retention expires an adopted night like any other: manifest, then its folders.
    swept = _sweep(store, _at(5), keep_days=2)  # 2 days before the latest night (2026-09-04): before 2026-09-02
    assert swept.expired == (_day(0).isoformat(),)
    assert _legacy_keys(store, _day(0)) == []
    assert _read(store, 0, 3) == {_day(1): 7, _day(2): 102, _day(3): 3}
    assert legacy.adopt(store) == []  # nothing of night 0 is left to adopt again
    assert {current, again} <= _runs(store)


def test_legacy_adoption_from_the_command_line(store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    if not store.root.startswith("file:"):
        pytest.skip("the command line is the same for every scheme; its storage is covered above")
    legacy_night(store, _day(0), mark=5)
    assert legacy.main(["--out", store.root, "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith(f"would adopt 1 nights under {store.uri(NIGHTS)}: {_day(0)}")
    assert _manifests(store) == []
    assert legacy.main(["--out", store.root]) == 0
    assert "adopted 1 nights" in capsys.readouterr().out
    assert _read(store, 0, 0) == {_day(0): 5}


def test_a_sweep_that_stops_is_logged_and_returned_and_does_not_fail_the_night(tmp_path: Path) -> None:
    store = ObjectStore(to_uri(tmp_path))
    failed = _failed_run(store, [_day(1)], mark=1, start=_at(1))
    store.write(f"{NIGHTS}/{_day(0)}.json", b'{"format": 99, "date": "2026-09-01", "run": "r", "tables": {}}')
    settings = ReportSettings(report_source="files", report_out_dir=tmp_path)
    with capture_logs() as logs:
        swept, error = sweep_output(store, settings, "20261128T030000Z-00000000")
    assert swept == cleanup.Cleanup()
    assert "is of a later manifest format (99)" in error
    assert logs == [{"event": "report_cleanup_failed", "log_level": "warning", "out": store.root, "error": error}]
    assert _runs(store) == {failed}


def test_a_night_of_the_earlier_layout_that_does_not_read_as_todays_tables_is_left_unadopted(tmp_path: Path) -> None:
    store = ObjectStore(to_uri(tmp_path))
    legacy_night(store, _day(0), mark=5)
    legacy_night(store, _day(1), mark=6)
    # Night 1's platforms file of another shape: its message count as text.
    for key in store.keys(f"platforms/date={_day(1)}"):
        store.delete(key)
    odd = pa.table({"platform": ["whatsapp"], "messages": ["six"]})
    sink = pa.BufferOutputStream()
    pq.write_table(odd, sink)
    store.write(f"platforms/date={_day(1)}/part-00000-odd.c000.snappy.parquet", sink.getvalue().to_pybytes())

    with capture_logs() as logs:
        assert legacy.adopt(store) == [_day(0)]
    assert [(e["event"], e["night"]) for e in logs] == [("report_legacy_night_unreadable", _day(1).isoformat())]
    assert "could not read the platforms table" in logs[0]["error"]
    assert _read(store, 0, 1) == {_day(0): 5}
    assert _sweep(store, _at(30), keep_days=1).folders == ()  # never adopted, so never swept
    assert store.keys(f"platforms/date={_day(1)}") == [f"platforms/date={_day(1)}/part-00000-odd.c000.snappy.parquet"]


def test_gcs_without_credentials_is_refused_without_a_local_endpoint() -> None:
    with pytest.raises(ConfigError, match="report_gcs_anonymous is for a local GCS server"):
        load(ReportSettings, report_gcs_anonymous=True)
    settings = load(ReportSettings, report_gcs_anonymous=True, report_gcs_endpoint="http://127.0.0.1:4443")
    assert hadoop_conf(S3Options(), GcsOptions(settings.report_gcs_endpoint, settings.report_gcs_anonymous)) == {
        "fs.gs.storage.root.url": "http://127.0.0.1:4443",
        "fs.gs.auth.type": "UNAUTHENTICATED",
    }
