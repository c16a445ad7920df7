"""Writing the report: Parquet tables partitioned by date, summary.csv, report.html, optionally PostgreSQL."""

from __future__ import annotations

import csv
import datetime as dt
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]  # py4j ships no types
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame

from inturn.errors import InturnError
from inturn_reports.transform import SCHEMAS
from inturn_reports.transform.small import dates


class ReportLoadError(InturnError):
    """A report table could not be written (Parquet, CSV, HTML or JDBC), or an earlier night's read back."""


def write_tables(tables: Mapping[str, pa.Table], out_dir: Path) -> dict[str, Path]:
    """Each table as Parquet under ``out_dir/<name>/date=YYYY-MM-DD/``, one file a day, replacing the days it holds.

    The days of earlier runs that this run does not cover are kept (as Spark's dynamic partition overwrite
    does). A day's file is written under a hidden name first, then the day's older files are removed and the
    new one renamed into place, so a reader never sees a half-written file. ``_SUCCESS`` marks the table
    written, as Spark marks it.
    """
    written = {}
    for name, frame in tables.items():
        root = out_dir / name
        try:
            root.mkdir(parents=True, exist_ok=True)
            for day in dates(frame):
                _write_day(frame.filter(pc.equal(frame["date"], day)).drop_columns(["date"]), root, day)
            (root / "_SUCCESS").touch()
        except (OSError, pa.ArrowException) as exc:
            raise ReportLoadError(f"could not write the {name} table under {root}: {exc}") from exc
        written[name] = root
    return written


def _write_day(rows: pa.Table, root: Path, day: dt.date) -> None:
    folder = root / f"date={day.isoformat()}"
    folder.mkdir(exist_ok=True)
    name = f"part-{uuid.uuid4()}.snappy.parquet"
    staged = folder / f".{name}.tmp"  # Spark and Arrow skip names starting with a dot
    pq.write_table(rows, staged, compression="snappy")
    for old in folder.iterdir():
        if old == staged:
            continue
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()
    staged.rename(folder / name)


def read_table(
    out_dir: Path, name: str, first: dt.date, last: dt.date, columns: Sequence[str] | None = None
) -> pa.Table:
    """The rows of the days ``first`` to ``last`` of the table ``name`` under ``out_dir`` (only ``columns``, and
    ``date``, when given), as ``write_tables`` (or Spark, before 2026-11-26) wrote them."""
    schema = SCHEMAS[name]
    days = ds.partitioning(pa.schema([schema.field("date")]), flavor="hive")
    wanted = None if columns is None else list(dict.fromkeys(["date", *columns]))
    try:
        dataset = ds.dataset(out_dir / name, schema=schema, format="parquet", partitioning=days)
        return dataset.to_table(columns=wanted, filter=(ds.field("date") >= first) & (ds.field("date") <= last))
    except (OSError, pa.ArrowException) as exc:
        raise ReportLoadError(f"could not read the {name} table under {out_dir / name}: {exc}") from exc


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def write_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], path: Path) -> Path:
    """``rows`` as one CSV file with a header (the summary is small; it is written from the driver)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row[c]) for c in columns])
    return path


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
