"""``load``: tables staged per run, nights published by their manifests, and only published nights read back (on a
local folder; tests/reports/test_storage.py does the same on an S3-compatible server)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from inturn_reports.load import NIGHTS, RUNS, ReportLoadError, publish, published_nights, read_table, write_tables
from inturn_reports.storage import ObjectStore, to_uri
from inturn_reports.transform.small import table

DAY1, DAY2, DAY3 = dt.date(2026, 9, 23), dt.date(2026, 9, 24), dt.date(2026, 9, 25)


def _platform(day: dt.date, platform: str, messages: int) -> dict[str, Any]:
    return {"date": day, "platform": platform, "messages": messages, "delivered": messages - 1, "ack_timeouts": 1,
            "pairs": messages - 1, "inverted": 0, "e2e_p99_ms": 812.5, "delivered_rate": (messages - 1) / messages,
            "out_of_order_rate": 0.0}  # fmt: skip


def _night(out: Path, run: str, rows: list[dict[str, Any]], *, published: bool = True) -> None:
    tables = {"platforms": table("platforms", rows)}
    write_tables(ObjectStore(to_uri(out)), tables, run)
    if published:
        publish(ObjectStore(to_uri(out)), run, tables, 0, 1)


def _read(out: Path) -> list[tuple[dt.date, str, int]]:
    rows = read_table(ObjectStore(to_uri(out)), "platforms", DAY1, DAY3).to_pylist()
    return sorted((r["date"], r["platform"], r["messages"]) for r in rows)


def test_a_run_replaces_the_nights_it_publishes_whole_and_keeps_the_others(tmp_path: Path) -> None:
    _night(tmp_path, "run-a", [_platform(DAY1, "whatsapp", 10), _platform(DAY2, "whatsapp", 20),
                                      _platform(DAY2, "telegram", 30)])  # fmt: skip
    # The next run covers the second night only, with one platform fewer: that night is what this run says.
    _night(tmp_path, "run-b", [_platform(DAY2, "whatsapp", 21)])
    assert _read(tmp_path) == [(DAY1, "whatsapp", 10), (DAY2, "whatsapp", 21)]
    nights = published_nights(ObjectStore(to_uri(tmp_path)), DAY1, DAY3)
    assert [(n.date, n.run, n.tables["platforms"]) for n in nights] == [
        (DAY1, "run-a", f"{RUNS}/run-a/platforms"), (DAY2, "run-b", f"{RUNS}/run-b/platforms")
    ]  # fmt: skip
    # As Spark writes a table: one Parquet file a night under date=..., without the date, which is the folder's.
    folder = tmp_path / RUNS / "run-b" / "platforms" / "date=2026-09-24"
    files = [p for p in folder.iterdir() if p.name.endswith(".parquet")]
    assert len(files) == 1
    assert "date" not in pq.read_schema(files[0]).names
    assert (tmp_path / RUNS / "run-b" / "platforms" / "_SUCCESS").exists()


def test_a_staged_run_that_never_published_is_not_read(tmp_path: Path) -> None:
    _night(tmp_path, "run-a", [_platform(DAY1, "whatsapp", 10)])
    _night(tmp_path, "run-b", [_platform(DAY1, "whatsapp", 99), _platform(DAY2, "line", 5)], published=False)
    assert (tmp_path / RUNS / "run-b" / "platforms" / "date=2026-09-24").is_dir()
    assert _read(tmp_path) == [(DAY1, "whatsapp", 10)]
    assert sorted(p.name for p in (tmp_path / NIGHTS).iterdir()) == ["2026-09-23.json"]


def test_nights_no_run_published_read_as_no_rows(tmp_path: Path) -> None:
    rows = read_table(ObjectStore(to_uri(tmp_path)), "rooms", DAY1, DAY3, ["room_id"])
    assert rows.num_rows == 0
    assert rows.schema.names == ["date", "room_id"]


def test_a_published_night_whose_tables_are_gone_is_a_load_error_naming_the_table(tmp_path: Path) -> None:
    _night(tmp_path, "run-a", [_platform(DAY1, "whatsapp", 10)])
    for path in sorted((tmp_path / RUNS / "run-a").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    with pytest.raises(ReportLoadError, match="could not read the platforms table"):
        _read(tmp_path)


def test_a_manifest_of_a_later_format_is_refused(tmp_path: Path) -> None:
    _night(tmp_path, "run-a", [_platform(DAY1, "whatsapp", 10)])
    manifest = tmp_path / NIGHTS / "2026-09-23.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "format": 99}))
    with pytest.raises(ReportLoadError, match="later manifest format"):
        _read(tmp_path)


def test_a_table_that_cannot_be_written_is_a_load_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / RUNS / "run-a").mkdir(parents=True)
    (tmp_path / RUNS / "run-a" / "summary").write_text("a file where the table's folder goes")
    with pytest.raises(ReportLoadError, match="could not write the summary table"):
        write_tables(ObjectStore(to_uri(tmp_path)), {"summary": table("summary", [])}, "run-a")
