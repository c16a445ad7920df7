"""Writing the report: Parquet tables partitioned by date, summary.csv, report.html, optionally PostgreSQL."""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]  # py4j ships no types
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame

from inturn.errors import InturnError


class ReportLoadError(InturnError):
    """A report table could not be written (Parquet, CSV, HTML or JDBC)."""


def write_tables(
    tables: Mapping[str, DataFrame], out_dir: Path, large: frozenset[str] = frozenset()
) -> dict[str, Path]:
    """Each table as Parquet under ``out_dir/<name>/date=YYYY-MM-DD/``, replacing the dates it holds.

    Dynamic partition overwrite keeps the days of earlier runs that this run does not cover. Tables
    not named in ``large`` have a few rows per day and are written as one file per day.
    """
    written = {}
    for name, frame in tables.items():
        path = out_dir / name
        (
            (frame if name in large else frame.coalesce(1))
            .write.mode("overwrite")
            .option("partitionOverwriteMode", "dynamic")
            .partitionBy("date")
            .parquet(str(path))
        )
        written[name] = path
    return written


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
