"""The worker benchmark's rounds: each worker run is set against the baseline runs on either side of it."""

from __future__ import annotations

from typing import Any

from benchmarks.bench_worker import _floor_total, _pooled, _rounds, _worker_total


def _bare(cpu_s: float) -> dict[str, Any]:
    return {"requests": 100, "failures": 0, "cpu_s": cpu_s, "wall_s": 1.0, "cpu_us_per_request": cpu_s / 100 * 1e6}


def _worker(cpu_s: float, lost: int = 0) -> dict[str, Any]:
    return {
        "messages": 1000,
        "rooms": 100,
        "wall_s": 2.0,
        "worker_cpu_s": cpu_s,
        "worker_cpu_us_per_message": cpu_s / 1000 * 1e6,
        "worker_rss_mb": 80.0,
        "worker_peak_rss_mb": 90.0,
        "peak_active_rooms": 100.0,
        "lost": lost,
        "reordered": 0,
        "duplicated": 0,
    }


# Baseline runs of 100, 140 and 120 µs per request; worker runs of 240 and 273 µs per message between them.
BARES = [_bare(0.010), _bare(0.014), _bare(0.012)]
WORKERS = [_worker(0.240), _worker(0.273, lost=1)]


def _floor(cpu_s: float, lost: int = 0) -> dict[str, Any]:
    return {
        "messages": 1000,
        "timed_out": 0,
        "cpu_s": cpu_s,
        "wall_s": 2.0,
        "cpu_us_per_message": cpu_s / 1000 * 1e6,
        "lost": lost,
        "reordered": 0,
        "duplicated": 0,
    }


# Floor runs of 180 and 195 µs per message, one in each round beside the worker run.
FLOORS = [_floor(0.180), _floor(0.195, lost=2)]


def test_each_round_sets_its_worker_run_against_the_baseline_runs_before_and_after_it() -> None:
    first, second = _rounds(WORKERS, BARES, FLOORS)
    assert first["bare_cpu_us_per_request"] == 120.0  # (100 + 140) / 2
    assert first["ratio"] == 2.0  # 240 / 120
    assert second["bare_cpu_us_per_request"] == 130.0  # (140 + 120) / 2
    assert second["ratio"] == 2.1  # 273 / 130


def test_runs_are_pooled_by_cpu_time_over_all_of_them() -> None:
    bare = _pooled(BARES)
    assert round(bare["cpu_us_per_request"], 6) == 120.0  # 0.036 s over 300 requests
    assert [round(r, 6) for r in bare["cpu_us_per_request_runs"]] == [100.0, 140.0, 120.0]
    worker = _worker_total(WORKERS)
    assert worker["worker_cpu_us_per_message"] == 256.5  # 0.513 s over 2000 messages
    assert worker["messages"] == 2000
    assert worker["lost"] == 1  # a loss in any run shows in the total
    assert len(worker["runs"]) == 2


def test_each_rounds_floor_run_is_set_against_the_same_baseline_runs_and_against_its_worker_run() -> None:
    first, second = _rounds(WORKERS, BARES, FLOORS)
    assert first["floor_ratio"] == 1.5  # 180 / 120
    assert first["worker_vs_floor"] == 1.333  # 240 / 180
    assert second["floor_ratio"] == 1.5  # 195 / 130
    assert second["worker_vs_floor"] == 1.4  # 273 / 195


def test_floor_runs_are_pooled_by_cpu_time_and_their_losses_add_up() -> None:
    floor = _floor_total(FLOORS)
    assert round(floor["cpu_us_per_message"], 6) == 187.5  # 0.375 s over 2000 messages
    assert [round(r, 6) for r in floor["cpu_us_per_message_runs"]] == [180.0, 195.0]
    assert floor["lost"] == 2
