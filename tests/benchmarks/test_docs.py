"""docs/benchmarks.md is rendered from the benchmark results: the figures of a hand-written results file
appear in its tables, its SVG plots and its reading, and the reading follows the figures."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from benchmarks import docs_figures, write_docs
from benchmarks.worker_figures import kafka_clients_section


def _mode(msgs_per_s: float, cpu_us: float, reordered: int) -> dict[str, Any]:
    spread = {"p50": 12.0, "p99": 345.0, "n": 100}
    return {
        "mode": "ack",
        "window_s": 25.0,
        "delivered_in_window": int(msgs_per_s * 25),
        "msgs_per_s": msgs_per_s,
        "worker_cpu_s": 5.0,
        "worker_cpu_us_per_message": cpu_us,
        "worker_rss_mb": 111.1,
        "worker_peak_rss_mb": 122.2,
        "peak_active_rooms": 100.0,
        "backlog_left_at_end": 4000,
        "latency": {
            "consumed_to_sent_ms": {"p50": 5016.0, "p99": 7796.0, "n": 100},
            "turn_to_sent_ms": {"p50": 1.0, "p99": 7.0, "n": 100},
            "ack_at_webhook_minus_injected_ms": spread,
            "ack_at_worker_minus_injected_ms": {"p50": 167.0, "p99": 818.0, "n": 100},
            "send_to_accepted_ms": {"p50": 2.0, "p99": 31.0, "n": 100},
            "delivered_to_webhook_ms": {"p50": 44.0, "p99": 290.0, "n": 100},
            "webhook_to_worker_ms": {"p50": 121.0, "p99": 497.0, "n": 100},
            "ack_timeouts": 0,
        },
        "receipts": {
            "produced": 6000,
            "received": 2000,
            "lost": 0,
            "not_yet_sent": 4000,
            "reordered": reordered,
            "duplicated": 0,
            "unexpected": 0,
        },
    }


RESULTS: dict[str, Any] = {
    "machine": {"platform": "Linux", "python": "3.11.7", "cpus": 2},
    "date": "2026-11-22",
    "results": {
        "matrix": {
            "machine": {
                "cpus": 2,
                "cpu_model": "Test CPU",
                "ram_gb": 23.5,
                "platform": "Linux-test",
                "python": "3.11.7",
                "kafka": "4.1.1",
                "load_average_at_start": [4.4, 2.96, 2.31],
                "load_average_at_end": [7.82, 4.38, 2.87],
            },
            "started_utc": "2026-11-22 13:14:36",
            "duration_s": 77.3,
            "quick": False,
            "code": {"commit": "0279a9152ced7e0f", "modified": ["services/worker/inturn_worker/room.py"]},
            "setup": {
                "partitions": 12,
                "payload_bytes": 1024,
                "latency_ms": {"median": 100, "p99": 400, "max": 2000},
                "ack_rates": [1.0, 0.85],
                "ack_timeout_ms": 1500,
                "raw_concurrency_cap": 200,
                "backlog_min": 50000,
                "raw_requests": 15000,
                "warmup_s": 5,
                "window_s": 25,
                "workers": 1,
            },
            "scenarios": [
                {
                    "name": "r100a100",
                    "rooms": 100,
                    "ack_rate": 1.0,
                    "raw": {"msgs_per_s": 1234.5, "cpu_us_per_request": 193.5},
                    "ack": _mode(321.5, 739.7, reordered=0),
                    "partition": {**_mode(45.6, 2075.9, reordered=0), "mode": "partition"},
                    "ack_over_partition": 7.05,
                    "ack_over_raw": 0.26,
                    "partition_over_raw": 0.037,
                    "ack_cpu_over_raw_cpu": 3.82,
                },
                {"name": "r25000a85", "rooms": 25000, "ack_rate": 0.85, "error": "TimeoutError('no send')"},
            ],
            "failed_scenarios": 1,
        },
        "webhook": {
            "batched": {"statuses_per_s": 5403.3},
            "single": {"statuses_per_s": 291.3},
            "baseline_healthz": {"requests_per_s": 749.6},
            "target_statuses_per_s": 5000,
            "batched_statuses_per_s_vs_target": 1.08,
            "single_vs_baseline_request_ratio": 0.389,
        },
    },
}


def _written(tmp_path: Path, results: dict[str, Any]) -> tuple[str, Path]:
    bench = tmp_path / "bench"
    bench.mkdir(parents=True)
    (bench / "results.json").write_text(json.dumps(results))
    doc, plots = tmp_path / "docs" / "benchmarks.md", tmp_path / "docs" / "benchmarks"
    doc.parent.mkdir()
    write_docs.write(write_docs.load(bench), doc, plots)
    return doc.read_text(), plots


def test_the_page_tables_carry_the_figures_of_each_scenario(tmp_path: Path) -> None:
    page, _ = _written(tmp_path, RESULTS)
    assert "| 100 | 1 | 321.5 | 45.6 | 1,234.5 | 7.05 | 0.260 | 0.037 |" in page
    assert "| 100 | 1 | ack | 5,016 / 7,796 | 1 / 7 | 12 / 345 | 167 / 818 | 0 |" in page
    assert "| 100 | 1 | 739.7 | 2,075.9 | 193.5 | 3.82 | 111.1 (122.2) |" in page
    assert "2 CPUs (Test CPU), 23.5 GB RAM" in page
    assert "Kafka 4.1.1" in page
    assert "commit 0279a9152ced, plus uncommitted changes to `services/worker/inturn_worker/room.py`" in page
    assert "| 100 | 1 | ack | 2 / 31 | 44 / 290 | 121 / 497 |" in page
    assert "at the start: 4.4, 2.96, 2.31" in page
    assert "r25000a85: TimeoutError('no send')" in page  # a failed scenario is named, not dropped silently
    assert "| webhook statuses/s, batched callbacks | 5,403.3 |" in page
    assert "python -m benchmarks.run matrix webhook &&" in page


def test_the_plots_are_svg_files_linked_from_the_page_with_the_measured_values(tmp_path: Path) -> None:
    page, plots = _written(tmp_path, RESULTS)
    for name in ("throughput", "latency", "cpu", "rss"):
        assert f"](benchmarks/{name}.svg)" in page
        assert (plots / f"{name}.svg").read_text().startswith("<svg")
    throughput = (plots / "throughput.svg").read_text()
    assert 'data-series="ack mode" data-category="100 @1" data-value="321.5"' in throughput
    assert 'data-series="partition mode" data-category="100 @1" data-value="45.6"' in throughput
    assert 'data-series="raw HTTP loop" data-category="100 @1" data-value="1234.5"' in throughput
    assert "<style>" in throughput  # grid and axis lines need their strokes outside the report page
    assert json.loads((plots / "results.json").read_text())["results"]["matrix"] == RESULTS["results"]["matrix"]


def test_the_reading_says_ordering_is_not_met_when_ack_mode_reordered(tmp_path: Path) -> None:
    page, _ = _written(tmp_path, RESULTS)
    assert "0 messages reordered at the device in ack mode in all 1 scenarios: met." in page
    reordered = copy.deepcopy(RESULTS)
    reordered["results"]["matrix"]["scenarios"][0]["ack"]["receipts"]["reordered"] = 3
    page, _ = _written(tmp_path / "again", reordered)
    assert (
        "Order: NOT met, ack mode reordered messages at the device whose predecessor reached the device within "
        "the ack timeout (r100a100: 3)." in page
    )
    assert "target ≥ 5000: met." in page
    # Two of the three came after their predecessor spent longer than the ack timeout in transit: one is still not
    # explained.
    reordered["results"]["matrix"]["scenarios"][0]["ack"]["receipts"]["reordered_past_timeout"] = 2
    page, _ = _written(tmp_path / "past", reordered)
    assert (
        "Order: NOT met, ack mode reordered messages at the device whose predecessor reached the device within " in page
    )
    assert "the ack timeout (r100a100: 1)." in page
    assert "| 100 | 1 | ack | 2,000 | 0 | 3 (2) | 0 | 4,000 |" in page


def test_the_reading_says_ordering_is_met_when_every_inversion_followed_a_message_in_transit_past_its_timeout(
    tmp_path: Path,
) -> None:
    results = copy.deepcopy(RESULTS)
    receipts = results["results"]["matrix"]["scenarios"][0]["ack"]["receipts"]
    receipts["reordered"] = receipts["reordered_past_timeout"] = 1
    page, _ = _written(tmp_path, results)
    assert "Order: met. Ack mode reordered messages at the device only where the earlier message spent longer " in page
    assert "than the ack timeout (1,500 ms)" in page
    assert "(r100a100: 1)" in page


def test_a_benchmark_missing_from_the_run_is_taken_from_its_own_file_and_marked(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "results.json").write_text(json.dumps(RESULTS))
    (bench / "bridge.json").write_text(json.dumps({"bridge_msgs_per_s": 1498, "baseline_ack_only_msgs_per_s": 1866}))
    results = write_docs.load(bench)
    page = write_docs.render(results)
    assert "| bridge messages/s (Pub/Sub → Kafka) | 1,498 | 1,866 msg/s bare subscriber |" in page
    assert f"`{bench / 'bridge.json'} of " in page
    assert "(not this run)" in page


def test_a_benchmark_in_neither_the_run_nor_its_own_file_is_kept_from_the_pages_last_figures(tmp_path: Path) -> None:
    """A partial run in a fresh checkout (``var/bench`` holding only what it ran) keeps the page's other figures,
    marked with where they came from; what this run has, and what a file of its own has, come first."""
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "results.json").write_text(json.dumps({"results": {"sim": {"msgs_per_s": 900}}}))
    (bench / "webhook.json").write_text(json.dumps({"batched": {"statuses_per_s": 4000}}))
    kept = tmp_path / "kept.json"
    kept.write_text(
        json.dumps(
            {
                "date": "2026-11-28",
                "results": {
                    "sim": {"msgs_per_s": 1},
                    "webhook": {"batched": {"statuses_per_s": 1}},
                    "bridge": {"bridge_msgs_per_s": 1498, "baseline_ack_only_msgs_per_s": 1866},
                    "report": {"events": 10, "_from": "var/bench/report.json of 2026-11-27 10:00 UTC"},
                },
            }
        )
    )
    results = write_docs.load(bench, kept)["results"]
    assert results["sim"] == {"msgs_per_s": 900}
    assert results["webhook"]["batched"] == {"statuses_per_s": 4000}
    assert results["bridge"]["_from"] == f"{kept}, the run of 2026-11-28"
    assert results["report"]["_from"] == "var/bench/report.json of 2026-11-27 10:00 UTC"
    assert "bridge" not in write_docs.load(bench)["results"]


def test_the_worker_baseline_shows_both_of_its_measurements_when_it_was_measured_twice() -> None:
    worker = {
        "bare_post": {"cpu_us_per_request": 111.96, "cpu_us_per_request_before_and_after": [96.84, 127.08]},
        "worker": {"worker_cpu_us_per_message": 296.0},
        "cpu_ratio_worker_vs_bare_post": 2.644,
        "target_ratio": 1.3,
    }
    once = copy.deepcopy(worker)
    del once["bare_post"]["cpu_us_per_request_before_and_after"]  # type: ignore[attr-defined]  # a dict in a dict[str, Any]
    twice_row = next(
        line for line in docs_figures.components({"results": {"worker": worker}}) if line.startswith("| worker CPU")
    )
    once_row = next(
        line for line in docs_figures.components({"results": {"worker": once}}) if line.startswith("| worker CPU")
    )
    assert "| 112.0 µs/request (before 96.8, after 127.1) | 2.64 |" in twice_row
    assert "| 112.0 µs/request | 2.64 |" in once_row


def test_the_worker_row_shows_every_run_and_every_rounds_ratio_when_it_ran_in_rounds() -> None:
    worker = {
        "bare_post": {"cpu_us_per_request": 120.25, "cpu_us_per_request_runs": [110.0, 131.5, 118.0, 121.5]},
        "worker": {
            "worker_cpu_us_per_message": 230.0,
            "runs": [{"worker_cpu_us_per_message": 221.0}, {"worker_cpu_us_per_message": 250.4}],
        },
        "cpu_ratio_worker_vs_bare_post": 1.913,
        "rounds": [{"ratio": 1.8417}, {"ratio": 2.0}],
        "target_ratio": 1.3,
    }
    row = next(
        line for line in docs_figures.components({"results": {"worker": worker}}) if line.startswith("| worker CPU")
    )
    assert (
        "| 230 µs/msg (runs 221, 250.4) | 120.2 µs/request (runs 110, 131.5, 118, 121.5) "
        "| 1.91 (rounds 1.84, 2) | ≤ 1.3 |" in row
    )


def test_the_worker_is_set_against_both_bare_posts_and_its_records_per_message_are_judged() -> None:
    worker = {
        "bare_post": {"cpu_us_per_request": 120.25},
        "bare_post_transport": {"cpu_us_per_request": 30.5, "cpu_us_per_request_runs": [28.0, 33.0]},
        "worker": {"worker_cpu_us_per_message": 230.0},
        "cpu_ratio_worker_vs_bare_post": 1.913,
        "cpu_ratio_worker_vs_bare_post_transport": 7.541,
        "rounds": [
            {"ratio_vs_aiohttp": 1.8417, "ratio_vs_inturn": 7.0},
            {"ratio_vs_aiohttp": 2.0, "ratio_vs_inturn": 8.1},
        ],
        "target_ratio": 0.7,
        "target_ratio_transport": 1.3,
        "records_per_message": 2.0,
        "target_records_per_message": 1,
    }
    results = {"results": {"worker": worker}}
    rows = docs_figures.components(results)
    own = next(line for line in rows if "through its own transport" in line)
    assert "| 230 µs/msg | 30.5 µs/request (runs 28, 33) | 7.54 (rounds 7, 8.10) | ≤ 1.3 |" in own
    aiohttp = next(line for line in rows if "vs bare aiohttp POST" in line)
    assert "| 1.91 (rounds 1.84, 2) | ≤ 0.7 |" in aiohttp
    records = next(line for line in rows if line.startswith("| records the worker wrote"))
    assert "| 2 | — | — | 1 |" in records
    reading = docs_figures.reading(results)
    assert "Worker CPU per message against a bare aiohttp POST: 1.913x, target ≤ 0.7: not met." in reading
    assert "Worker CPU per message against a bare POST through its transport: 7.541x, target ≤ 1.3: not met." in reading
    assert "Records the worker wrote per delivered message: 2, target 1: not met." in reading


def test_a_component_measured_in_this_run_names_the_commit_it_measured() -> None:
    worker = {
        "bare_post": {"cpu_us_per_request": 120.0},
        "worker": {"worker_cpu_us_per_message": 230.0},
        "cpu_ratio_worker_vs_bare_post": 1.917,
        "target_ratio": 1.3,
        "code": {"commit": "bc368ff0123456789", "modified": ["benchmarks/docs_figures.py"]},
    }
    row = next(
        line for line in docs_figures.components({"results": {"worker": worker}}) if line.startswith("| worker CPU")
    )
    assert row.endswith("| this run (commit bc368ff01234, plus uncommitted changes to `benchmarks/docs_figures.py`) |")


def _row(results: dict[str, Any], start: str) -> str:
    """The component table's row of ``results`` whose line starts with ``start``."""
    return next(line for line in docs_figures.components(results) if line.startswith(start))


def _against_the_floor() -> dict[str, Any]:
    """A worker benchmark's figures of the worker against its floor (each test adds what it is about)."""
    return {
        "bare_post": {"cpu_us_per_request": 200.0},
        "bare_post_transport": {"cpu_us_per_request": 40.0},
        "floor": {"cpu_us_per_request": 80.0, "cpu_us_per_request_runs": [78.0, 82.0]},
        "worker": {"worker_cpu_us_per_message": 140.0},
        "cpu_ratio_worker_vs_floor": 1.75,
        "cpu_ratio_floor_vs_bare_post_transport": 2.0,
        "rounds": [
            {"ratio_vs_floor": 1.7, "ratio_vs_ordered_floor": 1.5},
            {"ratio_vs_floor": 1.8, "ratio_vs_ordered_floor": 1.7},
        ],
    }


def test_the_worker_is_set_against_its_floor_and_the_floor_against_the_transport_target() -> None:
    """The floor (what any worker must do per message) has its own rows; when the floor itself is above the
    transport target, the reading says no worker of this design can meet that target here."""
    worker = {**_against_the_floor(), "target_ratio_transport": 1.3}
    results = {"results": {"worker": worker}}
    assert "| 80 µs/msg (runs 78, 82) | 40 µs/request | 2 | — |" in _row(results, "| the floor")
    against = _row(results, "| worker CPU per delivered message vs the floor")
    assert "| 140 µs/msg | 80 µs/msg | 1.75 (rounds 1.70, 1.80) | — |" in against
    reading = " ".join(docs_figures.reading(results))
    assert "cost 2x a bare POST through the transport, above the transport target of 1.3x" in reading
    worker["cpu_ratio_floor_vs_bare_post_transport"] = 1.2
    assert "above the transport target" not in " ".join(docs_figures.reading(results))


def test_the_ordered_floor_splits_the_workers_cost_into_waiting_for_acks_and_its_own_bookkeeping() -> None:
    """The ordered floor has a row against the floor and the worker one against it; the worker-vs-floor row states
    its target, and the reading judges it."""
    worker = {
        **_against_the_floor(),
        "ordered_floor": {"cpu_us_per_request": 88.0, "cpu_us_per_request_runs": [86.0, 90.0]},
        "cpu_ratio_ordered_floor_vs_floor": 1.1,
        "cpu_ratio_worker_vs_ordered_floor": 1.591,
        "target_ratio_floor": 1.3,
    }
    results = {"results": {"worker": worker}}
    rows = docs_figures.components(results)
    assert "| 88 µs/msg (runs 86, 90) | 80 µs/msg | 1.10 | — |" in _row(results, "| the ordered floor")
    against = _row(results, "| worker CPU per delivered message vs the ordered floor")
    assert "| 140 µs/msg | 88 µs/msg | 1.59 (rounds 1.50, 1.70) | — |" in against
    assert "| 1.75 (rounds 1.70, 1.80) | ≤ 1.3 |" in _row(results, "| worker CPU per delivered message vs the floor ")
    reading = " ".join(docs_figures.reading(results))
    assert "the worker cost 1.75x the floor, target ≤ 1.3: not met" in reading
    assert (
        "The ordered floor (the floor, each room's next send only once its message before was acknowledged) "
        "cost 1.1x the floor" in reading
    )
    assert "the worker cost 1.591x the ordered floor" in reading
    assert "written with callbacks" not in reading  # a run without that floor has no row or words for it
    assert not any(line.startswith("| the ordered floor written with callbacks") for line in rows)
    worker["ordered_floor_callbacks"] = {"cpu_us_per_request": 92.0, "cpu_us_per_request_runs": [91.0, 93.0]}
    worker["cpu_ratio_ordered_floor_callbacks_vs_floor"] = 1.15
    by_callbacks = _row(results, "| the ordered floor written with callbacks")
    assert "| 92 µs/msg (runs 91, 93) | 80 µs/msg | 1.15 | — |" in by_callbacks
    assert (
        "cost 1.1x the floor (1.15x written with callbacks, without a task or future per room or message): what "
        "waiting for each ack adds" in " ".join(docs_figures.reading(results))
    )
    assert not any(line.startswith("| Python calls per delivered message") for line in rows)
    worker["calls_per_message"] = {
        "worker": {"python": 124.4, "builtin": 130.5},
        "ordered_floor": {"python": 37.1, "builtin": 58.9},
        "ratio_python_worker_vs_ordered_floor": 3.35,
    }
    calls = _row(results, "| Python calls per delivered message on the event loop")
    assert "| 124.4 (130.5) | 37.1 (58.9) | 3.35 | — |" in calls
    assert "metrics and logs: 124.4 Python calls per message on its event loop against 37.1)" in " ".join(
        docs_figures.reading(results)
    )
    worker["cpu_ratio_worker_vs_floor"] = 1.29
    assert "the worker cost 1.29x the floor, target ≤ 1.3: met" in " ".join(docs_figures.reading(results))
    del worker["cpu_ratio_worker_vs_floor"]  # no figure, no verdict
    assert "target ≤ 1.3" not in " ".join(docs_figures.reading(results))


def test_the_floors_kafka_part_bounds_the_worker_from_below_and_the_reading_judges_the_transport_target() -> None:
    """The floor without its POST is the least a worker adds to the bare POST: its row states the bound as 1 + its
    CPU over the bare POST's, and the reading says the target is below it when it is."""
    worker = {
        "bare_post": {"cpu_us_per_request": 200.0},
        "bare_post_transport": {"cpu_us_per_request": 40.0},
        "floor": {"cpu_us_per_request": 80.0},
        "floor_kafka_part": {"cpu_us_per_request": 18.0, "cpu_us_per_request_runs": [17.0, 19.0]},
        "cpu_ratio_least_worker_vs_bare_post_transport": 1.45,
        "worker": {"worker_cpu_us_per_message": 140.0},
        "target_ratio_transport": 1.3,
    }
    results = {"results": {"worker": worker}}
    row = _row(results, "| the floor's Kafka part")
    assert "| 18 µs/msg (runs 17, 19) | 40 µs/request | 1.45 (1 + 18 / 40) | — |" in row
    reading = " ".join(docs_figures.reading(results))
    assert (
        "cost 18.0 µs per message: a worker costs at least 1.45x a bare POST through the transport, above the "
        "target of 1.3x before any ordering" in reading
    )
    worker["cpu_ratio_least_worker_vs_bare_post_transport"] = 1.25
    assert "a worker costs at least 1.25x a bare POST through the transport." in " ".join(docs_figures.reading(results))


def test_the_reports_floor_is_shown_against_the_scan_beside_the_report() -> None:
    report = {
        "events": 1000,
        "report": {"seconds": 90.0, "peak_rss_mb": 1900.0},
        "baseline_scan": {"seconds": 18.0},
        "floor": {"seconds": 30.6},
        "ratio_report_to_scan": 5.0,
        "ratio_floor_to_scan": 1.7,
        "target_ratio": 2.5,
    }
    results = {"results": {"report": report}}
    row = _row(results, "| the report's floor")
    assert "| 30.6 s | 18 s plain scan | 1.70 | — |" in row
    reading = " ".join(docs_figures.reading(results))
    assert "5x a plain scan, target ≤ 2.5x: not met" in reading
    assert "its floor (scan and one shuffle by room; nothing else) took 1.7x the scan" in reading


def test_the_bridge_and_simulator_rows_set_each_rate_against_its_same_run_baseline() -> None:
    results = {
        "results": {
            "bridge": {
                "bridge_msgs_per_s": 1498.2,
                "baseline_ack_only_msgs_per_s": 1866,
                "bridge_over_baseline": 0.8031,
            },
            "sim": {"msgs_per_s": 3000.5, "baseline_client_ceiling_msgs_per_s": 4000, "ratio_to_client_ceiling": 0.75},
        }
    }
    table = "\n".join(docs_figures.components(results))
    assert "| bridge messages/s (Pub/Sub → Kafka) | 1,498.2 | 1,866 msg/s bare subscriber | 0.803 | — |" in table
    assert "| platform simulator sends/s | 3,000.5 | 4,000 msg/s client ceiling | 0.750 | — |" in table


def test_the_kafka_clients_section_shows_each_clients_cost_per_record_against_confluent_kafka() -> None:
    section = kafka_clients_section(
        {
            "records": 100000,
            "rounds": 3,
            "clients": {
                "confluent-kafka": {
                    "produce_us_per_record": 3.5,
                    "produce_vs_confluent": 1.0,
                    "consume_us_per_record": 0.8,
                    "consume_vs_confluent": 1.0,
                },
                "aiokafka": {
                    "produce_us_per_record": 17.25,
                    "produce_vs_confluent": 4.93,
                    "consume_us_per_record": 1.8,
                    "consume_vs_confluent": 2.25,
                },
            },
        }
    )
    assert "| aiokafka | 17.25 | 4.93 | 1.80 | 2.25 |" in section
    assert "| confluent-kafka | 3.50 | 1 | 0.80 | 1 |" in section


def test_a_scenario_whose_backlog_ran_out_in_the_window_is_named_as_a_lower_bound(tmp_path: Path) -> None:
    results = copy.deepcopy(RESULTS)
    scenario = results["results"]["matrix"]["scenarios"][0]
    page, _ = _written(tmp_path, results)
    assert "backlog ran out" not in page  # 4,000 messages were left when the window ended
    scenario["ack"]["backlog_left_at_end"] = 0
    page, _ = _written(tmp_path / "drained", results)
    assert "**The backlog ran out within the window** in ack mode for: 100 rooms, ack rate 1." in page


def test_the_setup_line_states_the_backlog_margin_when_the_run_sized_the_backlog_by_it(tmp_path: Path) -> None:
    results = copy.deepcopy(RESULTS)
    results["results"]["matrix"]["setup"]["backlog_margin"] = 1.5
    page, _ = _written(tmp_path, results)
    assert "and at least 1.50 times what the raw loop's rate would send from the first send to the window's end" in page


def test_the_reading_explains_a_scenario_where_ack_mode_outpaced_the_raw_loop_on_less_cpu(tmp_path: Path) -> None:
    results = copy.deepcopy(RESULTS)
    scenario = results["results"]["matrix"]["scenarios"][0]
    page, _ = _written(tmp_path, results)
    assert "outpaced the raw loop" not in page  # 0.26 of the raw rate, at 3.82 times its CPU per message
    scenario.update(ack_over_raw=1.35, ack_cpu_over_raw_cpu=0.64)
    scenario["raw"]["cpu_us_per_request"] = 210.1
    scenario["ack"]["worker_cpu_us_per_message"] = 134.3
    page, _ = _written(tmp_path / "faster", results)
    assert (
        "Ack mode outpaced the raw loop at 100 rooms at ack rate 1 (1.35: 210.1 µs per request against the worker's "
        "134.3 per message)" in page
    )
