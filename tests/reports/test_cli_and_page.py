"""The parts of the report that need no Spark: time flags, the CLI's parser, the SVG charts."""

from __future__ import annotations

import json
import re

import pytest

from inturn.errors import ConfigError
from inturn_cli.main import build_parser
from inturn_reports.charts import bar_chart
from inturn_reports.flags import settings_from
from inturn_reports.job import ReportRun, parse_time, say


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1790200800000", 1_790_200_800_000),
        ("2026-09-23", 1_790_121_600_000),
        ("2026-09-23T22:00:00", 1_790_200_800_000),
        ("2026-09-24T00:00:00+02:00", 1_790_200_800_000),
    ],
)
def test_range_bounds_accept_epoch_ms_dates_and_iso_times_naive_meaning_utc(text: str, ms: int) -> None:
    assert parse_time(text) == ms


def test_a_range_bound_that_is_no_time_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="not a time"):
        parse_time("yesterday")


def test_inturn_report_takes_the_range_source_and_folders() -> None:
    args = build_parser().parse_args(
        ["report", "--from", "2026-09-23", "--to", "2026-09-24", "--source", "files", "--input", "x", "--out", "y"]
    )
    assert (args.from_, args.to, args.source, str(args.input), str(args.out)) == (
        "2026-09-23", "2026-09-24", "files", "x", "y",
    )  # fmt: skip


def test_inturn_report_nights_flag_sets_how_many_nights_the_trends_cover() -> None:
    args = build_parser().parse_args(["report", "--from", "2026-09-23", "--to", "2026-09-24", "--nights", "7"])
    assert settings_from(args).report_nights == 7
    default = build_parser().parse_args(["report", "--from", "2026-09-23", "--to", "2026-09-24"])
    assert args.nights == 7
    assert default.nights is None


def test_a_stacked_chart_draws_one_bar_per_series_and_category_with_its_value() -> None:
    svg = bar_chart("t", "title <&>", ["a", "b"], {"x": [1.0, 2.0], "y": [3.0, 0.0]}, stacked=True)
    bars = re.findall(r'data-series="(\w)" data-category="(\w)" data-value="([\d.]+)"', svg)
    assert bars == [("x", "a", "1"), ("y", "a", "3"), ("x", "b", "2"), ("y", "b", "0")]
    assert "title &lt;&amp;&gt;" in svg


def test_inturn_report_json_prints_the_run_as_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["report", "--from", "2026-09-23", "--to", "2026-09-24", "--json"])
    assert args.json is True
    run = ReportRun(
        out_dir="s3a://b/r", html="s3a://b/r/report.html", summary_csv="s3a://b/r/summary.csv", messages=1200,
        bad_events=2, bad_acks=0, seconds=3.5, jdbc_tables=("report_summary",), run_id="20260924T030000Z-0a1b2c3d",
        nights=("2026-09-23",),
    )  # fmt: skip
    say(run, as_json=True)
    assert json.loads(capsys.readouterr().out) == {
        "out_dir": "s3a://b/r", "html": "s3a://b/r/report.html", "summary_csv": "s3a://b/r/summary.csv",
        "messages": 1200, "bad_events": 2, "bad_acks": 0, "seconds": 3.5, "jdbc_tables": ["report_summary"],
        "run_id": "20260924T030000Z-0a1b2c3d", "nights": ["2026-09-23"], "adopted": [],
        "cleanup": {"expired": [], "folders": [], "runs": []}, "cleanup_error": "",
    }  # fmt: skip
    say(run, as_json=False)
    assert capsys.readouterr().out.splitlines()[0] == "report: 1,200 messages in 3.5s -> s3a://b/r"
