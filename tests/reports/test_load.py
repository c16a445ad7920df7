"""``load.write_tables`` and ``load.read_table``: a night's files replaced whole, other nights kept, and the nights
Spark wrote before the tables moved to the driver read along with the new ones."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from inturn_reports.load import ReportLoadError, read_table, write_tables
from inturn_reports.transform import SCHEMAS
from inturn_reports.transform.small import table

DAY1, DAY2, DAY3 = dt.date(2026, 9, 23), dt.date(2026, 9, 24), dt.date(2026, 9, 25)


def _platform(day: dt.date, platform: str, messages: int) -> dict[str, Any]:
    return {"date": day, "platform": platform, "messages": messages, "delivered": messages - 1, "ack_timeouts": 1,
            "pairs": messages - 1, "inverted": 0, "e2e_p99_ms": 812.5, "delivered_rate": (messages - 1) / messages,
            "out_of_order_rate": 0.0}  # fmt: skip


def _read(out: Path) -> list[tuple[dt.date, str, int]]:
    rows = read_table(out, "platforms", DAY1, DAY3).to_pylist()
    return sorted((r["date"], r["platform"], r["messages"]) for r in rows)


def test_a_run_replaces_the_nights_it_holds_and_keeps_the_others(tmp_path: Path) -> None:
    write_tables({"platforms": table("platforms", [_platform(DAY1, "whatsapp", 10), _platform(DAY2, "whatsapp", 20),
                                                   _platform(DAY2, "telegram", 30)])}, tmp_path)  # fmt: skip
    # The next run covers the second night only, with one platform fewer: that night is what this run says.
    write_tables({"platforms": table("platforms", [_platform(DAY2, "whatsapp", 21)])}, tmp_path)
    assert _read(tmp_path) == [(DAY1, "whatsapp", 10), (DAY2, "whatsapp", 21)]
    night = tmp_path / "platforms" / "date=2026-09-24"
    assert [p.name.startswith("part-") and p.name.endswith(".parquet") for p in night.iterdir()] == [True]
    assert (tmp_path / "platforms" / "_SUCCESS").exists()
    # The files hold the night's rows without the date, which is the folder's: as Spark writes them.
    assert "date" not in pq.read_schema(next(night.iterdir())).names


@pytest.mark.spark
def test_nights_spark_wrote_read_along_with_the_new_ones(spark: SparkSession, tmp_path: Path) -> None:
    # Up to 2026-11-26 Spark wrote the tables (partitionBy("date"), its own file names, .crc files and _SUCCESS).
    # Those nights have the columns of then: no notes of what cannot be measured (read back as null).
    columns = [c for c in SCHEMAS["platforms"].names if not c.endswith("_note")]
    old = [_platform(DAY1, "whatsapp", 10), _platform(DAY2, "whatsapp", 20)]
    frame = spark.createDataFrame([tuple(r[c] for c in columns) for r in old],
                                  "date date, platform string, messages long, delivered long, ack_timeouts long, "
                                  "pairs long, inverted long, e2e_p99_ms double, delivered_rate double, "
                                  "out_of_order_rate double")  # fmt: skip
    frame.write.partitionBy("date").parquet(str(tmp_path / "platforms"))
    write_tables({"platforms": table("platforms", [_platform(DAY2, "whatsapp", 22), _platform(DAY3, "line", 5)])},
                 tmp_path)  # fmt: skip
    assert _read(tmp_path) == [(DAY1, "whatsapp", 10), (DAY2, "whatsapp", 22), (DAY3, "line", 5)]
    # And Spark reads what the driver wrote.
    back = spark.read.parquet(str(tmp_path / "platforms")).where("date = DATE'2026-09-25'").collect()
    assert [(r["platform"], r["messages"], r["e2e_p99_ms"]) for r in back] == [("line", 5, 812.5)]


def test_reading_a_table_no_run_wrote_is_a_load_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ReportLoadError, match="could not read the rooms table"):
        read_table(tmp_path, "rooms", DAY1, DAY3)


def test_a_table_that_cannot_be_written_is_a_load_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "summary").write_text("a file where the table's folder goes")
    with pytest.raises(ReportLoadError, match="could not write the summary table"):
        write_tables({"summary": pa.Table.from_pylist([], schema=SCHEMAS["summary"])}, tmp_path)
