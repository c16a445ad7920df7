"""The whole job from exported files: tables, CSV, PostgreSQL over JDBC, and the HTML report in Chromium."""

from __future__ import annotations

import asyncio
import csv
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest
from pyspark.sql import SparkSession

from inturn.schemas import encode
from inturn_reports.job import TABLES, ReportRun, run
from inturn_reports.load import RUNS
from inturn_reports.settings import ReportSettings
from inturn_reports.storage import join, local_path
from tests.reports import fixture, oracle
from tests.reports.browser import HAS_CHROMIUM, bars, rendered_page
from tests.reports.generator import generate

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

START = 1_790_200_800_000  # 2026-09-23 22:00 UTC; the 4 h range crosses midnight
SPAN = 4 * 3_600_000


@dataclass
class FilesReport:
    run: ReportRun
    msgs: list[oracle.Msg]
    dsn: str
    schema: str


def _export(folder: Path, records: list[bytes], garbage: list[bytes]) -> None:
    folder.mkdir(parents=True)
    (folder / "part-0.json").write_bytes(b"\n".join(records[: len(records) // 2]) + b"\n")
    (folder / "part-1.json").write_bytes(b"\n".join([*garbage, *records[len(records) // 2 :]]) + b"\n")


async def _sql(dsn: str, query: str, schema: str = "public") -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        return await conn.fetch(query)
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def files_report(
    spark: SparkSession, postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FilesReport]:
    """One run of the job over exported JSON lines (with two unreadable lines each), loaded into PostgreSQL too."""
    stream = generate(seed=5, rooms=30, messages_per_room=5, start_ms=START, span_ms=SPAN)
    hand = fixture.hand_fixture(START + 3_600_000)
    events, acks = stream.events + hand.events, stream.acks + hand.acks
    root = tmp_path_factory.mktemp("files-report")
    _export(root / "in" / "events", [encode(e) for e in events], [b"{not json", b'{"type": "acked"}'])
    _export(root / "in" / "acks", [encode(a) for a in acks], [b"[]", b'{"status": "sent"}'])
    schema = f"r_{uuid.uuid4().hex[:10]}"
    asyncio.run(_sql(postgres_dsn, f'CREATE SCHEMA "{schema}"'))
    dsn = urlsplit(postgres_dsn)
    settings = ReportSettings(
        report_source="files",
        report_input_dir=root / "in",
        report_out_dir=root / "out",
        report_top_n=3,
        report_jdbc_url=f"jdbc:postgresql://{dsn.hostname}:{dsn.port}{dsn.path}?currentSchema={schema}",
        report_jdbc_user=dsn.username,
    )
    try:
        result = run(spark, settings, START, START + SPAN)
        yield FilesReport(result, oracle.messages(events, acks, START, START + SPAN), postgres_dsn, schema)
    finally:
        asyncio.run(_sql(postgres_dsn, f'DROP SCHEMA "{schema}" CASCADE'))


def test_unreadable_exported_lines_are_counted_and_left_out(files_report: FilesReport) -> None:
    assert (files_report.run.bad_events, files_report.run.bad_acks) == (2, 2)
    assert files_report.run.messages == len(files_report.msgs)


def test_tables_are_partitioned_by_date_and_the_csv_summary_matches_the_oracle(files_report: FilesReport) -> None:
    out = local_path(join(files_report.run.out_dir, RUNS, files_report.run.run_id))
    assert out is not None
    expected = sorted(oracle.summary(files_report.msgs), key=lambda r: (r["date"], r["platform"], r["mode"]))
    dates = sorted({f"date={r['date'].isoformat()}" for r in expected})
    assert len(dates) == 2
    for table in TABLES:
        assert sorted(p.name for p in (out / table).glob("date=*")) == dates, table
    with Path(str(local_path(files_report.run.summary_csv))).open() as f:
        rows = list(csv.DictReader(f))
    counts = ["messages", "acked", "ack_timeouts", "late_acks", "retries", "dead_letters", "duplicates", "pairs",
              "inverted", "no_device_ts", "dispatch_violations"]  # fmt: skip
    # A figure the platform cannot report (docs/reports.md, "What the report can see") is an empty cell, not 0.
    got = [(r["date"], r["platform"], r["mode"], *(int(r[c]) if r[c] else None for c in counts)) for r in rows]
    want = [(r["date"].isoformat(), r["platform"], r["mode"], *(r[c] for c in counts)) for r in expected]
    assert got == want


def test_summary_and_worst_rooms_reach_postgresql_over_jdbc(files_report: FilesReport) -> None:
    assert files_report.run.jdbc_tables == ("report_summary", "report_worst_rooms")
    query = "SELECT platform, mode, sum(messages) AS n FROM report_summary GROUP BY platform, mode"
    rows = asyncio.run(_sql(files_report.dsn, query, files_report.schema))
    want: dict[tuple[str, str], int] = {}
    for m in files_report.msgs:
        want[(m.platform, m.mode)] = want.get((m.platform, m.mode), 0) + 1
    assert {(r["platform"], r["mode"]): r["n"] for r in rows} == want
    worst = asyncio.run(_sql(files_report.dsn, "SELECT count(*) AS n FROM report_worst_rooms", files_report.schema))
    assert worst[0]["n"] > 0


@pytest.mark.skipif(not HAS_CHROMIUM, reason="chromium is installed by scripts/setup-system.sh")
def test_the_html_report_renders_in_headless_chromium_with_its_charts(
    files_report: FilesReport, tmp_path: Path
) -> None:
    dom = rendered_page(Path(str(local_path(files_report.run.html))), tmp_path / "report.png")
    for chart in ("latency", "ordering", "outcomes"):
        assert any(b["value"] > 0 for b in bars(dom, chart)), chart
    # The ordering chart shows the hand-checked rooms' rates (in %): fx-whatsapp/ack 2 of 4 pairs, fx-instagram 1 of 1.
    ordering = {(b["category"], b["series"]): b["value"] for b in bars(dom, "ordering")}
    assert ordering[("fx-whatsapp", "ack")] == pytest.approx(50.0)
    assert ordering[("fx-instagram", "ack")] == pytest.approx(100.0)
    assert 'id="worst-rooms"' in dom
