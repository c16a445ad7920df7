"""The worker benchmark's rounds: each worker run is set against each baseline's runs on either side of it; the
records the worker wrote add up over its runs."""

from __future__ import annotations

from typing import Any

from benchmarks.bench_worker import _pooled, _rounds, _worker_total


def _bare(cpu_s: float) -> dict[str, Any]:
    return {"requests": 100, "failures": 0, "cpu_s": cpu_s, "wall_s": 1.0, "cpu_us_per_request": cpu_s / 100 * 1e6}


def _worker(cpu_s: float, lost: int = 0, records: int = 2000, webhook_cpu_s: float = 0.1) -> dict[str, Any]:
    return {
        "messages": 1000,
        "rooms": 100,
        "wall_s": 2.0,
        "worker_cpu_s": cpu_s,
        "worker_cpu_us_per_message": cpu_s / 1000 * 1e6,
        "records_written": records,
        "webhook_cpu_s": webhook_cpu_s,
        "webhook_cpu_us_per_message": webhook_cpu_s / 1000 * 1e6,
        "worker_rss_mb": 80.0,
        "worker_peak_rss_mb": 90.0,
        "peak_active_rooms": 100.0,
        "lost": lost,
        "reordered": 0,
        "duplicated": 0,
    }


# aiohttp baseline runs of 100, 140 and 120 µs per request, transport runs of 20, 30, 25; worker runs of 240 and
# 273 µs per message between them, which wrote 2 and then 1 records per message.
BARES = {"aiohttp": [_bare(0.010), _bare(0.014), _bare(0.012)], "inturn": [_bare(0.002), _bare(0.003), _bare(0.0025)]}
WORKERS = [_worker(0.240), _worker(0.273, lost=1, records=1000, webhook_cpu_s=0.12)]


def test_each_round_sets_its_worker_run_against_each_baselines_runs_before_and_after_it() -> None:
    first, second = _rounds(WORKERS, BARES)
    assert first["bare_aiohttp_cpu_us_per_request"] == 120.0  # (100 + 140) / 2
    assert first["ratio_vs_aiohttp"] == 2.0  # 240 / 120
    assert first["bare_inturn_cpu_us_per_request"] == 25.0  # (20 + 30) / 2
    assert first["ratio_vs_inturn"] == 9.6  # 240 / 25
    assert second["bare_aiohttp_cpu_us_per_request"] == 130.0  # (140 + 120) / 2
    assert second["ratio_vs_aiohttp"] == 2.1  # 273 / 130
    assert second["ratio_vs_inturn"] == 9.927  # 273 / 27.5


def test_runs_are_pooled_by_cpu_time_over_all_of_them() -> None:
    bare = _pooled(BARES["aiohttp"])
    assert round(bare["cpu_us_per_request"], 6) == 120.0  # 0.036 s over 300 requests
    assert [round(r, 6) for r in bare["cpu_us_per_request_runs"]] == [100.0, 140.0, 120.0]
    worker = _worker_total(WORKERS)
    assert worker["worker_cpu_us_per_message"] == 256.5  # 0.513 s over 2000 messages
    assert worker["messages"] == 2000
    assert worker["webhook_cpu_us_per_message"] == 110.0  # the webhook's 0.22 s over 2000 messages
    assert [round(r, 6) for r in worker["webhook_cpu_us_per_message_runs"]] == [100.0, 120.0]
    assert worker["lost"] == 1  # a loss in any run shows in the total
    assert len(worker["runs"]) == 2


def test_records_per_message_are_over_every_run() -> None:
    worker = _worker_total(WORKERS)
    assert worker["records_written"] == 3000
    assert worker["records_per_message"] == 1.5  # 3000 records for 2000 messages
