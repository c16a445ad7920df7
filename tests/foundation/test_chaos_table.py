"""The fault matrix's table in docs/reliability.md is regenerated from the rows a ``make chaos`` run recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from inturn_devtools import chaos_table

ROOT = Path(__file__).resolve().parents[2]

ROW = {
    "scenario": "kill -9 a worker every 10 s",
    "scale": "5000 rooms x 20, 3 workers",
    "faults": 5,
    "produced": 100000,
    "lost": 0,
    "reordered": 0,
    "duplicated": 563,
    "worst_room": "room-118",
    "worst_count": 2,
    "worst_bound": 3,
    "bound": 9991,
    "unexpected": 0,
    "run_s": 58.04,
    "drain_s": 7.6,
    "test": "tests/chaos/test_worker_faults.py::test_kill",
}
CLEAN = {
    **ROW,
    "scenario": "rolling SIGTERM",
    "scale": "1000 rooms x 6, 3 workers",
    "faults": 3,
    "produced": 6000,
    "duplicated": 0,
    "worst_room": None,
    "worst_count": 0,
    "worst_bound": 0,
    "bound": 0,
    "run_s": 11.2,
    "drain_s": 1.6,
}


def test_rows_recorded_by_a_run_become_the_documents_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = tmp_path / "var" / "rows.jsonl"
    monkeypatch.setenv(chaos_table.ROWS_ENV, str(rows))
    chaos_table.record(ROW)
    chaos_table.record(CLEAN)
    doc = tmp_path / "reliability.md"
    doc.write_text(f"# Before\n\n{chaos_table.BEGIN}\n| an old table |\n{chaos_table.END}\n\nAfter.\n")

    assert chaos_table.main([str(rows), str(doc)]) == 0

    text = doc.read_text()
    assert text.startswith(f"# Before\n\n{chaos_table.BEGIN}\n| scenario | scale | faults |")
    assert text.endswith(f"{chaos_table.END}\n\nAfter.\n")
    assert "| an old table |" not in text
    lines = text.splitlines()
    kill = (
        "| kill -9 a worker every 10 s | 5000 rooms x 20, 3 workers | 5 | 100,000 | 0 | 0 | 563 / room-118 2, bound 3 "
        "| 9,991 | 7.6 s | 58.0 s |"
    )
    sigterm = "| rolling SIGTERM | 1000 rooms x 6, 3 workers | 3 | 6,000 | 0 | 0 | 0 / - | 0 | 1.6 s | 11.2 s |"
    assert lines.index(kill) < lines.index(sigterm), "rows in the order the run recorded them"
    assert any(line.startswith("2 rows, recorded ") for line in lines)


def test_nothing_is_recorded_without_the_variable_and_a_missing_rows_file_leaves_the_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(chaos_table.ROWS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    chaos_table.record(ROW)
    assert list(tmp_path.iterdir()) == []
    doc = tmp_path / "reliability.md"
    doc.write_text(f"{chaos_table.BEGIN}\n| kept |\n{chaos_table.END}\n")
    assert chaos_table.main([str(tmp_path / "absent.jsonl"), str(doc)]) == 1
    assert doc.read_text() == f"{chaos_table.BEGIN}\n| kept |\n{chaos_table.END}\n"


def test_a_document_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="no chaos table markers"):
        chaos_table.rewrite("# reliability\n| a table |\n", chaos_table.table([ROW]))


def test_docs_reliability_md_carries_the_markers_make_chaos_rewrites_between() -> None:
    text = (ROOT / "docs/reliability.md").read_text()
    assert text.count(chaos_table.BEGIN) == 1
    assert text.count(chaos_table.END) == 1
    assert text.index(chaos_table.BEGIN) < text.index(chaos_table.END)
