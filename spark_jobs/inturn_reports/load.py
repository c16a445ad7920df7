"""Writing the report: each night's tables as Parquet, published by a manifest; summary.csv, report.html; optionally
PostgreSQL.

A night is written in two steps, because object stores (S3, GCS, Azure) have no atomic rename of a folder:

1. **Stage.** Spark writes every table of the run under ``<out>/runs/<run>/<table>/date=YYYY-MM-DD/`` (Parquet,
   partitioned by date; ``<run>`` is new for each run, so nothing a reader may be reading is touched).
2. **Publish.** Then, for each night the run holds, one small object ``<out>/_nights/YYYY-MM-DD.json`` (the
   night's manifest: the run, and where each of its tables lies) is written, replacing the night's earlier one.
   An object appears whole or not at all (``storage.ObjectStore``), so a night is either the earlier run's or
   this one's, never a mix.

Readers (the trends, ``read_table``) read a night only through its manifest: a run that fails or is killed before
publishing leaves the earlier nights exactly as they were, and what it staged is never read.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]  # py4j ships no types
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame

from inturn.errors import InturnError
from inturn_reports.storage import ObjectStore
from inturn_reports.transform import SCHEMAS
from inturn_reports.transform.small import dates

#: Where the manifests of the published nights are, under the output location.
NIGHTS = "_nights"
#: Where each run stages its tables, under the output location.
RUNS = "runs"
#: The manifests' format: a reader refuses a manifest of a later one.
MANIFEST_FORMAT = 1
_MANIFEST_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}\.json$")


class ReportLoadError(InturnError):
    """A report table could not be written (Parquet, CSV, HTML or JDBC), or an earlier night's read back."""


@dataclasses.dataclass(frozen=True)
class Night:
    """A published night: the run that wrote it, and where each table's rows of it lie (relative to the output)."""

    date: dt.date
    run: str
    tables: Mapping[str, str]


def new_run_id(now_ms: int | None = None) -> str:
    """A run's name: its start time (UTC) and a random suffix, e.g. ``20261128T0300Z-1f2e3d4c``."""
    moment = dt.datetime.fromtimestamp((time.time() * 1000 if now_ms is None else now_ms) / 1000, dt.UTC)
    return f"{moment:%Y%m%dT%H%M%S}Z-{uuid.uuid4().hex[:8]}"


def write_tables(store: ObjectStore, tables: Mapping[str, pa.Table], run: str) -> dict[str, str]:
    """Stage each table as Parquet under ``<out>/runs/<run>/<name>/date=YYYY-MM-DD/`` (one file a night, without the
    date column, which is the folder's: as Spark's ``partitionBy`` writes it; ``_SUCCESS`` last); readers see none of
    it until ``publish``. The URI of each table's folder."""
    written = {}
    for name, frame in tables.items():
        folder = f"{RUNS}/{run}/{name}"
        try:
            for day in dates(frame):
                rows = frame.filter(pc.equal(frame["date"], day)).drop_columns(["date"])
                sink = io.BytesIO()
                pq.write_table(rows, sink, compression="snappy")
                store.write(f"{folder}/date={day.isoformat()}/part-00000-{run}.snappy.parquet", sink.getvalue())
            store.write(f"{folder}/_SUCCESS", b"")
        except (OSError, pa.ArrowException) as exc:
            raise ReportLoadError(f"could not write the {name} table under {store.uri(folder)}: {exc}") from exc
        written[name] = store.uri(folder)
    return written


def publish(store: ObjectStore, run: str, tables: Mapping[str, pa.Table], from_ms: int, to_ms: int) -> list[dt.date]:
    """Make the nights the run's tables hold the readers' nights: one manifest each, written after every table is
    staged (``write_tables``). The nights published, in order."""
    nights = sorted({day for frame in tables.values() for day in dates(frame)})
    for day in nights:
        write_manifest(store, day, run, (from_ms, to_ms), {name: f"{RUNS}/{run}/{name}" for name in tables})
    return nights


def write_manifest(
    store: ObjectStore,
    day: dt.date,
    run: str,
    range_ms: tuple[int, int],
    tables: Mapping[str, str],
    **extra: Any,
) -> None:
    """Publish the night ``day``: its manifest, naming the run and each table's folder (relative to the output),
    replacing the night's earlier one whole."""
    manifest = {
        "format": MANIFEST_FORMAT,
        "date": day.isoformat(),
        "run": run,
        "range_ms": list(range_ms),
        "published": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "tables": dict(tables),
        **extra,
    }
    try:
        store.write(f"{NIGHTS}/{day.isoformat()}.json", json.dumps(manifest, indent=2).encode())
    except (OSError, pa.ArrowException) as exc:
        raise ReportLoadError(f"could not publish the night {day} under {store.uri(NIGHTS)}: {exc}") from exc


def published_nights(store: ObjectStore, first: dt.date, last: dt.date) -> list[Night]:
    """The nights ``first`` to ``last`` that a run published (the others have no manifest), in order: one listing of
    ``_nights/``, then the manifests in the range read."""
    return _read_nights(store, [day for day in published_dates(store) if first <= day <= last])


def published_dates(store: ObjectStore) -> list[dt.date]:
    """The dates of every published night (from the manifests' names, none read), in order."""
    found = []
    for key in store.keys(NIGHTS):
        name = key.rsplit("/", 1)[-1]
        if not _MANIFEST_NAME.match(name):
            continue  # a manifest being written (a hidden name on a local disk), or no manifest
        try:
            found.append(dt.date.fromisoformat(name.removesuffix(".json")))
        except ValueError:
            continue  # no date: no manifest of this report's
    return found


def all_nights(store: ObjectStore) -> list[Night]:
    """Every published night (each manifest under ``_nights/``), in order."""
    return _read_nights(store, published_dates(store))


def _read_nights(store: ObjectStore, days: Sequence[dt.date]) -> list[Night]:
    """The manifests of ``days`` (16 read at a time: over months they are hundreds of small objects); a night whose
    manifest went since the listing is left out."""

    def read(day: dt.date) -> Night | None:
        key = f"{NIGHTS}/{day.isoformat()}.json"
        try:
            data = store.read(key)
        except (OSError, pa.ArrowException) as exc:
            raise ReportLoadError(f"could not read {store.uri(key)}: {exc}") from exc
        return None if data is None else _night(store.uri(key), data)

    with ThreadPoolExecutor(max_workers=16, thread_name_prefix="manifests") as pool:
        return [night for night in pool.map(read, days) if night is not None]


def _night(uri: str, data: bytes) -> Night:
    try:
        manifest = json.loads(data)
        if manifest["format"] > MANIFEST_FORMAT:
            raise ReportLoadError(f"{uri} is of a later manifest format ({manifest['format']}) than this report's")
        return Night(dt.date.fromisoformat(manifest["date"]), str(manifest["run"]), dict(manifest["tables"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ReportLoadError(f"{uri} is no night's manifest: {exc!r}") from exc


def read_table(
    store: ObjectStore, name: str, first: dt.date, last: dt.date, columns: Sequence[str] | None = None
) -> pa.Table:
    """The rows of the published nights ``first`` to ``last`` of the table ``name`` (only ``columns``, and ``date``,
    when given), read from where each night's manifest says they are."""
    schema = SCHEMAS[name]
    wanted = schema.names if columns is None else list(dict.fromkeys(["date", *columns]))
    target = pa.schema([schema.field(c) for c in wanted])
    parts = [target.empty_table()]
    for night in published_nights(store, first, last):
        if name in night.tables:
            parts.append(read_night(store, name, night.tables[name], night.date, wanted))
    return pa.concat_tables(parts)


def read_night(store: ObjectStore, name: str, folder: str, day: dt.date, columns: Sequence[str]) -> pa.Table:
    """The rows of the night ``day`` of the table ``name`` in ``folder`` (``<folder>/date=<day>/``, relative to the
    output), ``columns`` only (``date`` among them, from the folder's name); ReportLoadError where they cannot be
    read as today's schema."""
    schema = SCHEMAS[name]
    in_files = pa.schema([f for f in schema if f.name != "date"])  # the date is the folder's
    where = f"{folder}/date={day.isoformat()}"
    try:
        files = [k for k in store.keys(where) if data_file(k)]
        if not files:
            raise FileNotFoundError(f"no Parquet file in {store.uri(where)}")
        paths = [store.path(k) for k in files]
        dataset = ds.dataset(paths, schema=in_files, format="parquet", filesystem=store.filesystem)
        rows = dataset.to_table(columns=[c for c in columns if c != "date"])
        rows = rows.append_column(schema.field("date"), pa.array([day] * rows.num_rows, pa.date32()))
        return rows.select(list(columns))
    except (OSError, pa.ArrowException) as exc:
        raise ReportLoadError(f"could not read the {name} table under {store.uri(where)}: {exc}") from exc


def data_file(key: str) -> bool:
    """A Parquet file of a table's folder: not ``_SUCCESS``, nor a hidden file (a write in progress, a checksum)."""
    name = key.rsplit("/", 1)[-1]
    return name.endswith(".parquet") and not name.startswith((".", "_"))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def csv_bytes(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> bytes:
    """``rows`` as one CSV file with a header (the summary is small; it is written from the driver)."""
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row[c]) for c in columns])
    return text.getvalue().encode()


def write_object(store: ObjectStore, key: str, data: bytes) -> str:
    """``data`` as the object ``key`` under the output location (summary.csv, report.html); its URI."""
    try:
        return store.write(key, data)
    except (OSError, pa.ArrowException) as exc:
        raise ReportLoadError(f"could not write {store.uri(key)}: {exc}") from exc


def write_jdbc(tables: Mapping[str, DataFrame], url: str, user: str | None, password: str | None) -> list[str]:
    """Each table into PostgreSQL as ``report_<name>``, replaced whole (the table holds the latest run)."""
    if not url.startswith("jdbc:postgresql:"):
        raise ReportLoadError(f"the JDBC load supports PostgreSQL only (jdbc:postgresql://...), got {url!r}")
    written = []
    for name, frame in tables.items():
        writer = (
            frame.write.mode("overwrite")
            .format("jdbc")
            .option("url", url)
            .option("dbtable", f"report_{name}")
            .option("driver", "org.postgresql.Driver")
            # Keep the table (and its grants) on re-runs; only its rows are replaced.
            .option("truncate", "true")
        )
        if user is not None:
            writer = writer.option("user", user)
        if password is not None:
            writer = writer.option("password", password)
        try:
            writer.save()
        except (Py4JJavaError, PySparkException) as exc:
            raise ReportLoadError(f"JDBC load of report_{name} into {url.split('?')[0]} failed: {exc}") from exc
        written.append(f"report_{name}")
    return written
