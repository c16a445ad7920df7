"""The report benchmark's rounds: each command's runs pooled into one figure."""

from __future__ import annotations

from benchmarks import docs_figures
from benchmarks.bench_report import _pooled


def test_runs_are_pooled_as_the_median_time_and_the_highest_peak() -> None:
    runs = [
        {"seconds": 17.0, "peak_rss_mb": 1400.0},
        {"seconds": 14.0, "peak_rss_mb": 1500.5},
        {"seconds": 20.0, "peak_rss_mb": 1350.0},
    ]
    assert _pooled(runs) == {"seconds": 17.0, "peak_rss_mb": 1500.5, "runs_s": [17.0, 14.0, 20.0]}


def test_the_report_row_shows_each_run_of_the_report_and_of_the_scan() -> None:
    report = {
        "events": 1000,
        "report": {"seconds": 80.0, "peak_rss_mb": 1700.0, "runs_s": [76.0, 84.0]},
        "baseline_scan": {"seconds": 16.0, "runs_s": [15.0, 16.0, 18.0]},
        "ratio_report_to_scan": 5.0,
        "target_ratio": 2.5,
    }
    row = next(
        line
        for line in docs_figures.components({"results": {"report": report}})
        if line.startswith("| Spark report over")
    )
    assert "| 80 s (runs 76, 84), peak 1,700 MiB | 16 s plain scan (runs 15, 16, 18) | 5 |" in row
