"""The report job: extract, transform, load. ``python -m inturn_reports`` and ``spark-submit`` enter at ``main``."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import structlog
from pyspark.sql import DataFrame, SparkSession

from inturn.errors import ConfigError, InturnError, exit_status
from inturn_reports import cleanup, extract, legacy, page
from inturn_reports.cleanup import Cleanup
from inturn_reports.flags import add_arguments, settings_from
from inturn_reports.load import (
    csv_bytes,
    new_run_id,
    publish,
    read_table,
    write_jdbc,
    write_object,
    write_tables,
)
from inturn_reports.session import spark_session
from inturn_reports.settings import ReportSettings
from inturn_reports.storage import GcsOptions, ObjectStore, S3Options, hadoop_conf, scheme, to_uri
from inturn_reports.transform import (
    ReportParams,
    TrendParams,
    latency_histogram,
    nightly,
    platforms,
    room_pass,
    split,
    summary,
    timeline,
    worst_rooms,
    worst_rooms_of_the_nights,
)
from inturn_reports.transform.trends import NIGHTLY, SUMMED

_log = structlog.get_logger("inturn_reports")

#: The tables written as Parquet (partitioned by date, published night by night: load.py); summary and worst_rooms
#: also go to JDBC.
TABLES = ("summary", "rooms", "worst_rooms", "timeline", "latency_histogram", "platforms")


@dataclasses.dataclass(frozen=True)
class ReportRun:
    """What a run wrote and counted (locations as URIs)."""

    out_dir: str
    html: str
    summary_csv: str
    messages: int
    bad_events: int
    bad_acks: int
    seconds: float
    jdbc_tables: tuple[str, ...] = ()
    run_id: str = ""
    nights: tuple[str, ...] = ()
    adopted: tuple[str, ...] = ()  # nights of the earlier layout published by this run (legacy.py)
    #: What retention and the sweep of unpublished runs deleted (cleanup.py).
    cleanup: Cleanup = dataclasses.field(default_factory=Cleanup)
    cleanup_error: str = ""  # why that sweep stopped, if it did (the night itself is published)


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from epoch ms, a date (``2026-11-22``) or ISO 8601 (naive means UTC)."""
    if text.isdigit():
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise ConfigError(f"not a time: {text!r} (use epoch ms, YYYY-MM-DD or ISO 8601)") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def _extract(spark: SparkSession, settings: ReportSettings, from_ms: int, to_ms: int) -> extract.Extracted:
    until = to_ms + settings.report_grace_ms  # late acks of the range's messages still count
    if settings.report_source == "files":
        return extract.from_files(spark, to_uri(settings.report_input_dir), from_ms, until)
    return extract.from_kafka(
        spark,
        settings.kafka_bootstrap,
        settings.topic_events,
        settings.topic_acks,
        from_ms,
        until,
        settings.kafka_client_config,
        settings.topic_statuses,
    )


def compute_tables(events: DataFrame, acks: DataFrame, params: ReportParams) -> dict[str, pa.Table]:
    """Every report table, on the driver: the pass over the rooms (Spark's one job) brought over as Arrow, the
    small tables summed from its counts (``small``)."""
    per_room, counted_rows = split(room_pass(events, acks, params).toArrow())
    return {
        "summary": summary(counted_rows),
        "rooms": per_room,
        "worst_rooms": worst_rooms(per_room, params.top_n),
        "timeline": timeline(counted_rows),
        "latency_histogram": latency_histogram(counted_rows),
        "platforms": platforms(counted_rows),
    }


#: The order each table's rows are read in for the page (tables not listed are not shown row by row).
_PAGE_ORDER = {
    "summary": ("date", "platform", "mode"),
    "worst_rooms": ("date", "measure", "rank"),
    "timeline": ("bucket_start_ms", "mode"),
    "latency_histogram": ("date", "mode", "measure", "upper_ms"),
}


def _rows(frame: pa.Table, *order: str) -> list[dict[str, Any]]:
    """The rows of a small table in ``order`` (ascending, nulls first)."""
    rows: list[dict[str, Any]] = frame.sort_by([(c, "ascending", "at_start") for c in order]).to_pylist()
    return rows


def s3_options(settings: ReportSettings) -> S3Options:
    """How ``s3a://`` reaches its server, from the settings."""
    return S3Options(settings.report_s3_endpoint, settings.report_s3_region, settings.report_s3_path_style)


def gcs_options(settings: ReportSettings) -> GcsOptions:
    """How ``gs://`` reaches its endpoint, from the settings."""
    return GcsOptions(settings.report_gcs_endpoint, settings.report_gcs_anonymous)


def output_store(settings: ReportSettings) -> ObjectStore:
    """The output location's small objects (``storage.ObjectStore``), reached as the settings say."""
    return ObjectStore(to_uri(settings.report_out_dir), s3_options(settings), gcs_options(settings))


def trends(store: ObjectStore, params: TrendParams) -> page.Trends:
    """The last nights as this run and earlier ones published them under the output location."""
    per_night = nightly(read_table(store, "platforms", params.first, params.last, NIGHTLY), params)
    columns = ["room_id", "platform", "mode", *SUMMED]
    room_rows = read_table(store, "rooms", params.first, params.last, columns)
    worst = worst_rooms_of_the_nights(room_rows, params)
    return page.Trends(first=params.first, last=params.last, nightly=_rows(per_night, "date", "platform"),
                       worst_rooms=worst)  # fmt: skip


def run(spark: SparkSession, settings: ReportSettings, from_ms: int, to_ms: int) -> ReportRun:
    """Read the range, compute every table, and write them all under ``settings.report_out_dir``: the tables staged,
    then published night by night (load.py), then summary.csv and report.html with the trends of the published
    nights."""
    if to_ms <= from_ms:
        raise ConfigError(f"--to ({to_ms}) must be after --from ({from_ms})")
    started = time.monotonic()
    params = ReportParams(
        from_ms=from_ms,
        to_ms=to_ms,
        top_n=settings.report_top_n,
        timeline_bucket_ms=settings.report_timeline_bucket_s * 1000,
    )
    store = output_store(settings)
    out = store.root
    # Spark hands them to the filesystems of this session's reads and writes.
    for key, value in hadoop_conf(s3_options(settings), gcs_options(settings)).items():
        spark.conf.set(key, value)
    source = _extract(spark, settings, from_ms, to_ms)
    tables = compute_tables(source.events, source.acks, params)
    run_id = new_run_id()
    write_tables(store, tables, run_id)
    nights = publish(store, run_id, tables, from_ms, to_ms)
    adopted = _adopt_legacy(store)
    rows = {name: _rows(tables[name], *order) for name, order in _PAGE_ORDER.items()}
    summary_rows = rows["summary"]
    columns = tables["summary"].column_names
    csv_uri = write_object(store, "summary.csv", csv_bytes(summary_rows, columns))
    meta = {
        "range": f"{_iso(from_ms)} → {_iso(to_ms)}",
        "source": settings.report_source,
        "messages": f"{sum(r['messages'] for r in summary_rows):,}",
        "generated": _iso(int(time.time() * 1000)),
    }
    html = page.render(
        summary_rows,
        rows["worst_rooms"],
        rows["timeline"],
        rows["latency_histogram"],
        trends(store, TrendParams.ending_before(to_ms, settings.report_nights, settings.report_top_n)),
        meta,
    )
    html_uri = write_object(store, "report.html", html.encode())
    jdbc: tuple[str, ...] = ()
    if settings.report_jdbc_url:
        password = settings.report_jdbc_password.get_secret_value() if settings.report_jdbc_password else None
        jdbc = tuple(
            write_jdbc(
                {name: spark.createDataFrame(tables[name]) for name in ("summary", "worst_rooms")},
                settings.report_jdbc_url,
                settings.report_jdbc_user,
                password,
            )
        )
    bad_events, bad_acks = source.bad_events.count(), source.bad_acks.count()
    source.release()
    swept, cleanup_error = sweep_output(store, settings, run_id)
    return ReportRun(
        out_dir=out,
        html=html_uri,
        summary_csv=csv_uri,
        messages=sum(int(r["messages"]) for r in summary_rows),
        bad_events=bad_events,
        bad_acks=bad_acks,
        seconds=time.monotonic() - started,
        jdbc_tables=jdbc,
        run_id=run_id,
        nights=tuple(day.isoformat() for day in nights),
        adopted=tuple(day.isoformat() for day in adopted),
        cleanup=swept,
        cleanup_error=cleanup_error,
    )


def _adopt_legacy(store: ObjectStore) -> list[dt.date]:
    """The earlier layout's nights published (``legacy``), so that the trends read them; a failure only logged."""
    try:
        adopted = legacy.adopt(store)
    except (InturnError, OSError, pa.ArrowException) as exc:
        _log.warning("report_legacy_adoption_failed", out=store.root, error=str(exc))
        return []
    if adopted:
        _log.info("report_legacy_nights_adopted", out=store.root, nights=[d.isoformat() for d in adopted])
    return adopted


def sweep_output(store: ObjectStore, settings: ReportSettings, run_id: str) -> tuple[Cleanup, str]:
    """Retention and the unpublished runs (``cleanup``), after the night is published and its page written: a
    failure is logged and returned, never the night's (the next night sweeps again)."""
    try:
        swept = cleanup.sweep(
            store,
            keep_days=settings.report_keep_days,
            grace=dt.timedelta(seconds=settings.report_cleanup_grace_s),
            now=dt.datetime.now(dt.UTC),
            keep_runs={run_id},
        )
    except (InturnError, OSError, pa.ArrowException) as exc:
        _log.warning("report_cleanup_failed", out=store.root, error=str(exc))
        return Cleanup(), str(exc)
    _log.info("report_cleanup", out=store.root, expired=list(swept.expired), runs=list(swept.runs),
              folders=len(swept.folders))  # fmt: skip
    return swept, ""


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def run_args(args: argparse.Namespace) -> int:
    """Run the report for parsed flags; prints where it went. Exit code 0."""
    settings = settings_from(args)
    from_ms, to_ms = parse_time(args.from_), parse_time(args.to)
    locations = [settings.report_out_dir] + ([settings.report_input_dir] if settings.report_source == "files" else [])
    schemes = {scheme(to_uri(location)) for location in locations} - {"file"}
    spark = spark_session(
        settings.report_master,
        settings.report_shuffle_partitions,
        settings.report_driver_memory,
        # The Kafka source and JDBC driver are fetched from Maven Central only when this run needs them.
        with_jars=settings.report_source == "kafka" or settings.report_jdbc_url is not None,
        connectors=schemes,  # the Hadoop connectors of the object stores read or written
    )
    say(run(spark, settings, from_ms, to_ms), as_json=getattr(args, "json", False))
    return 0


def say(result: ReportRun, *, as_json: bool) -> None:
    """Print where a run went and what it counted: lines for a person, or one JSON document (``--json``)."""
    if as_json:
        print(json.dumps(dataclasses.asdict(result), indent=2, default=str))  # paths as text, the tuple as a list
        return
    print(f"report: {result.messages:,} messages in {result.seconds:.1f}s -> {result.out_dir}")
    print(f"html: {result.html}\nsummary: {result.summary_csv}")
    if result.bad_events or result.bad_acks:
        print(f"skipped unreadable records: events={result.bad_events} acks={result.bad_acks}")
    if result.jdbc_tables:
        print(f"jdbc: {', '.join(result.jdbc_tables)}")
    if result.adopted:
        print(f"earlier layout: {len(result.adopted)} nights published ({result.adopted[0]} to {result.adopted[-1]})")
    swept = result.cleanup
    if swept.expired or swept.runs or swept.folders:
        print(f"cleanup: {len(swept.expired)} nights past retention, {len(swept.runs)} unpublished runs, "
              f"{len(swept.folders)} folders deleted")  # fmt: skip
    if result.cleanup_error:
        print(f"cleanup stopped (the night is published; the next night tries again): {result.cleanup_error}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m inturn_reports`` and ``spark-submit .../inturn_reports/__main__.py``."""
    parser = argparse.ArgumentParser(prog="inturn_reports", description="inturn delivery and ordering report")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_args(args)
    except InturnError as exc:
        return exit_status("inturn report", exc)
