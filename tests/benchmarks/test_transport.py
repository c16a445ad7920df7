"""The transport benchmark's figures: each candidate over all its runs against the baseline's, per round too, and
how they read on the benchmark page."""

from __future__ import annotations

from typing import Any

from benchmarks.bench_transport import summary
from benchmarks.worker_figures import transport_reading, transport_section


def _run(cpu_s: float, wall_s: float = 2.0, requests: int = 1000) -> dict[str, Any]:
    return {
        "requests": requests,
        "failures": 0,
        "cpu_s": cpu_s,
        "wall_s": wall_s,
        "cpu_us_per_request": cpu_s / requests * 1e6,
    }


# aiohttp runs of 100 and 300 µs per request (200 over both); the transport's of 20 and 40 (30 over both).
RUNS = {"aiohttp": [_run(0.1), _run(0.3)], "inturn": [_run(0.02, wall_s=1.0), _run(0.04, wall_s=1.0)]}


def test_each_client_is_pooled_over_its_runs_and_set_against_the_baseline_overall_and_per_round() -> None:
    figures = summary(RUNS)
    assert figures["inturn"]["cpu_us_per_request"] == 30.0
    assert figures["inturn"]["cpu_ratio_to_baseline"] == 0.15  # 30 / 200
    assert figures["inturn"]["cpu_ratio_to_baseline_rounds"] == [0.2, 0.133]  # 20 / 100, 40 / 300
    assert figures["inturn"]["requests_per_s"] == 1000.0  # 2000 requests in 2 s
    assert figures["aiohttp"]["cpu_ratio_to_baseline"] == 1.0


def test_the_page_names_the_baseline_each_candidate_s_figures_and_the_adopted_one() -> None:
    results = {
        "setup": {"pool": 200, "senders": 2000, "requests_per_run": 1000, "rounds": 2, "sim": {}},
        "baseline": "aiohttp",
        "clients": summary(RUNS),
        "not_installed": ["aiosonic"],
        "cheapest": "inturn",
        "adopted": "inturn",
    }
    page = "\n".join(transport_section(results))
    assert "| inturn (adopted) |" in page
    assert "| 30 | 1,000 | 0.15 (rounds 0.20, 0.13) | 0 |" in page
    assert "| 200 | 500 | 1 (rounds 1, 1) | 0 |" in page
    assert "The baseline is aiohttp (today's client), measured in the same run." in page
    assert "Not measured (package not installed): aiosonic." in page
    assert transport_reading(results) == [
        "The adapters' transport (inturn) cost 0.15x aiohttp's client CPU per request in the same run: the cheapest "
        "measured."
    ]
