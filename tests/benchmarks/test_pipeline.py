"""The pipeline benchmark's arithmetic on hand-made figures: the broker's JMX counters as read, their deltas per
delivered message, the comparison with the baseline against the issue's bounds, and the docs section and plot."""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

from benchmarks import bench_pipeline, pipeline_figures, write_docs
from inturn_devtools.kafka import parse_broker_metrics

JMX_LINE = "\x01".join(
    [
        "kafka.network:name=RequestsPerSec,request=Produce,type=RequestMetrics,version=11\t70",
        "kafka.network:name=RequestsPerSec,request=Produce,type=RequestMetrics,version=9\t5",
        "kafka.network:name=RequestsPerSec,request=Fetch,type=RequestMetrics,version=17\t300",
        "kafka.server:name=MessagesInPerSec,topic=t.acks,type=BrokerTopicMetrics\t2400",
        "kafka.server:name=TotalFetchRequestsPerSec,topic=t.acks,type=BrokerTopicMetrics\t120",
        "kafka.server:name=MessagesInPerSec,type=BrokerTopicMetrics\t3400",
    ]
)


def test_the_jmx_helpers_line_sums_request_versions_and_keeps_topics_apart() -> None:
    assert parse_broker_metrics(JMX_LINE + "\n") == {
        ("requests", "Produce"): 75,
        ("requests", "Fetch"): 300,
        ("MessagesInPerSec", "t.acks"): 2400,
        ("TotalFetchRequestsPerSec", "t.acks"): 120,
        ("MessagesInPerSec", ""): 3400,
    }


def test_an_empty_snapshot_has_no_counters() -> None:
    assert parse_broker_metrics("\n") == {}


def test_counters_per_delivered_message_count_from_the_windows_start() -> None:
    before = {("requests", "Produce"): 100, ("MessagesInPerSec", "t.acks"): 1000}
    after = {
        ("requests", "Produce"): 300,
        ("MessagesInPerSec", "t.acks"): 3000,
        ("TotalFetchRequestsPerSec", "t.acks"): 50,  # appeared during the window
        ("requests", "Metadata"): 0,
    }
    delta = bench_pipeline.counter_delta(before, after)
    assert delta == {
        ("requests", "Produce"): 200,
        ("MessagesInPerSec", "t.acks"): 2000,
        ("TotalFetchRequestsPerSec", "t.acks"): 50,
    }
    figures = bench_pipeline.per_message(delta, {"acks": "t.acks", "events": "t.events"}, 1000)
    assert figures["topics"]["acks"] == {
        "records": 2.0,
        "produce_requests": 0.0,
        "fetch_requests": 0.05,
        "bytes_in": 0.0,
        "bytes_out": 0.0,
    }
    assert figures["topics"]["events"]["records"] == 0.0
    assert figures["requests"] == {"Produce": 0.2}
    assert figures["requests_total"] == 0.2


def test_a_consumers_fetch_counts_once_in_the_requests_total() -> None:
    # The broker marks a consumer's fetch under Fetch and again under FetchConsumer (a follower's: FetchFollower).
    delta = {("requests", "Fetch"): 300, ("requests", "FetchConsumer"): 250, ("requests", "FetchFollower"): 50}
    delta[("requests", "Produce")] = 400
    figures = bench_pipeline.per_message(delta, {}, 100)
    assert figures["requests"] == {"Fetch": 3.0, "FetchConsumer": 2.5, "FetchFollower": 0.5, "Produce": 4.0}
    assert figures["requests_total"] == 7.0


def test_sizing_reckons_each_process_at_half_a_core_and_the_events_partitions_from_the_ends_read() -> None:
    run = {"cpu_us_per_message": {"broker": 700.0, "worker": 800.0, "webhook": 1200.0}}
    rows = pipeline_figures.sizing(run, (1_000, 10_000, 50_000))
    # 1,000 msg/s: broker 0.7 cores -> 2 at half a core; worker 0.8 -> 2 replicas; webhook 1.2 -> 3; partitions
    # 2 x 2 = 4; events: 1,000 x 60 s = 60,000 records -> 2 partitions of at most 50,000.
    assert rows[0] == {
        "rate": 1_000,
        "broker_cores": 2,
        "workers": 2,
        "webhooks": 3,
        "partitions": 4,
        "events_partitions": 2,
    }
    # 10,000: 7 -> 14, 8 -> 16, 12 -> 24; 32 partitions; events 600,000 / 50,000 = 12.
    assert rows[1] == {
        "rate": 10_000,
        "broker_cores": 14,
        "workers": 16,
        "webhooks": 24,
        "partitions": 32,
        "events_partitions": 12,
    }
    # 50,000: events 3,000,000 / 50,000 = 60, within the 160 messages partitions.
    assert rows[2]["events_partitions"] == 60
    assert rows[2]["partitions"] == 160
    # 300 msg/s: one worker, two partitions; events 18,000 records -> one partition.
    [low] = pipeline_figures.sizing(run, (300,))
    assert (low["workers"], low["partitions"], low["events_partitions"]) == (1, 2, 1)


def test_sizing_is_reckoned_from_the_sized_variant_where_it_ran() -> None:
    base = {"cpu_us_per_message": {"broker": 1.0}, "rate_msgs_per_s": 300}
    sized = {"cpu_us_per_message": {"broker": 2.0}, "rate_msgs_per_s": 300}
    assert pipeline_figures.sizing_source({"rounds": [{"baseline": base, "sized": sized}]})[0] is sized
    assert pipeline_figures.sizing_source({"rounds": [{"baseline": base, "sized": {"error": "x"}}]})[0] is base
    assert pipeline_figures.sizing_source({"rounds": []}) == (None, "")


def _run(
    broker: float, worker: float, webhook: float, turn_p99: float, ack_p99: float, jit: float = 0.0
) -> dict[str, Any]:
    cpu = {"broker": broker, "worker": worker, "webhook": webhook, "sim": 100.0}
    return {
        "variant": "x",
        "partitions": 12,
        "delivered_msgs_per_s": 290.0,
        "cpu_us_per_message": {**cpu, "broker_jit": jit, "broker_less_jit": broker - jit},
        "idle_cores": {"broker": 0.08, "worker": 0.04, "webhook": 0.01, "sim": 0.01},
        "latency_ms": {
            "turn_to_sent": {"p50": 1.0, "p99": turn_p99, "n": 100},
            "ack": {"p50": 30.0, "p99": ack_p99, "n": 100},
        },
        "broker": {
            "topics": {
                "messages": {"records": 1.0, "produce_requests": 0.5, "fetch_requests": 0.7},
                "acks": {"records": 2.64, "produce_requests": 0.3, "fetch_requests": 0.4},
                "events": {"records": 1.0, "produce_requests": 0.05, "fetch_requests": 0.0},
            },
            "requests": {"Produce": 0.9, "Fetch": 1.1},
            "requests_total": 2.2,
        },
        "receipts": {"lost": 0},
        "load_average": {"start": [3.5, 3.0, 2.0], "end": [4.25, 3.0, 2.0]},
    }


def test_a_variant_meets_the_bounds_only_with_all_of_them() -> None:
    base = _run(600.0, 250.0, 240.0, 20.0, 100.0, jit=200.0)
    good = bench_pipeline.compare(_run(300.0, 250.0, 200.0, 30.0, 110.0, jit=60.0), base)
    assert good["cpu_ratio"] == {"broker": 0.5, "worker": 1.0, "webhook": 0.833, "sim": 1.0, "broker_less_jit": 0.6}
    assert good["p99_delta"] == {"turn_to_sent_p99_ms": 10.0, "ack_p99_ms": 10.0}
    assert good["broker_at_most_half"]
    assert not good["broker_less_jit_at_most_half"], "the broker's own work is 0.6 of the baseline's"
    assert good["latency_within_10ms"]
    assert good["worker_webhook_not_above"]

    slow_ack = bench_pipeline.compare(_run(300.0, 250.0, 200.0, 30.0, 110.5), base)
    assert slow_ack["broker_at_most_half"]
    assert not slow_ack["latency_within_10ms"]
    dear_broker = bench_pipeline.compare(_run(301.0, 240.0, 200.0, 20.0, 100.0), base)
    assert not dear_broker["broker_at_most_half"]
    assert dear_broker["latency_within_10ms"]
    dear_worker = bench_pipeline.compare(_run(200.0, 251.0, 200.0, 20.0, 100.0), base)
    assert not dear_worker["worker_webhook_not_above"]


def _pipeline() -> dict[str, Any]:
    base = _run(600.0, 250.0, 240.0, 20.0, 100.0, jit=100.0)
    tuned = _run(250.0, 230.0, 220.0, 24.0, 104.0, jit=50.0)
    tuned["variant"] = "defaults"
    tuned["vs_baseline"] = bench_pipeline.compare(tuned, base)
    return {
        "started_utc": "2026-11-28 08:00:00",
        "kafka": "4.1.1",
        "cpus": 2,
        "setup": {
            "rate_msgs_per_s": 300,
            "rooms": 2000,
            "idle_s": 5,
            "warmup_s": 10,
            "broker_warmup_s": 60,
            "window_s": 40,
            "lost_share": 0.12,
            "ack_timeout_ms": 1500,
        },
        "variants": {
            "baseline": {
                "partitions": 12,
                "common": {},
                "worker": {"INTURN_WORKER_FETCH_MIN_BYTES": "1"},
                "webhook": {},
            },
            "defaults": {"partitions": 6, "common": {}, "worker": {}, "webhook": {}},
        },
        "rounds": [{"baseline": base, "defaults": tuned}, {"baseline": base, "defaults": {"error": "boom"}}],
        "sustainable": {
            "rate": 450.0,
            "window_s": 15.0,
            "backlog_growth_max": 0.05,
            "tried": [
                {"rate": 300.0, "sustained": True, "backlog": {"growth_share": 0.01}},
                {"rate": 450.0, "sustained": True, "backlog": {"growth_share": 0.03}},
                {"rate": 600.0, "sustained": False, "backlog": {"growth_share": 0.4}},
            ],
            "rounds": [{"baseline": base}],
        },
        "bridge": {
            "rate_msgs_per_s": 300,
            "window_s": 40.0,
            "written_msgs_per_s": 299.5,
            "idle_cores": {"bridge": 0.01, "emulator": 0.2},
            "cpu_us_per_message": {"bridge": 80.0, "emulator": 900.0},
            "cpu_us_per_message_less_idle": {"bridge": 75.0, "emulator": 300.0},
        },
    }


def test_the_plot_stacks_broker_worker_webhook_and_the_bridge_stage_per_variant_and_round() -> None:
    labels, series = pipeline_figures.plot_series(_pipeline())
    assert labels == ["baseline #1", "defaults #1", "baseline #2", "baseline @450 #1"]
    assert series == {
        "broker": [600.0, 250.0, 600.0, 600.0],
        "worker": [250.0, 230.0, 250.0, 250.0],
        "webhook": [240.0, 220.0, 240.0, 240.0],
        "bridge": [80.0, 80.0, 80.0, 80.0],  # measured once, in its own stage
    }
    svg = write_docs.pipeline_plot(_pipeline())
    assert svg.startswith("<svg")
    assert 'data-value="250' in svg


def test_the_docs_section_shows_the_figures_and_the_verdict() -> None:
    text = "\n".join(pipeline_figures.pipeline_section(_pipeline(), "benchmarks"))
    assert "one status per request" in text
    assert "before the first variant the broker served 60 s of the baseline's traffic, not counted" in text
    assert "| defaults #1 | 290 | 250 | 230 | 220 | 50 |" in text
    assert "`INTURN_WORKER_FETCH_MIN_BYTES=1`" in text
    assert "| defaults #1 | 0.417 | 0.920 | 0.917 | 0.400 | 1 | 4 | 4 | yes |" in text  # the simulator: 1
    assert "failed: boom" in text
    assert "![CPU per delivered message, stacked](benchmarks/pipeline.svg)" in text
    assert "the bridge **80 µs** of CPU per message" in text
    assert "sustainable rate: **450 msg/s**" in text
    assert "300 msg/s held (1%), 450 msg/s held (3%), 600 msg/s grew (40%)" in text
    assert "| baseline @450 #1 | 290 |" in text
    worse = copy.deepcopy(_pipeline())
    worse["rounds"][0]["defaults"]["vs_baseline"]["broker_at_most_half"] = False
    assert "| no |" in "\n".join(pipeline_figures.pipeline_section(worse, "benchmarks"))


def test_the_baseline_keeps_every_status_on_acks_and_only_the_statuses_variants_split() -> None:
    split = {n: v.webhook_env()["INTURN_WEBHOOK_STATUSES_SPLIT"] for n, v in bench_pipeline.VARIANTS.items()}
    assert split["baseline"] == "false"
    assert split["statuses"] == "true"
    assert split["p4msgfetchstatuses"] == "true"
    assert split["p4msgfetch"] == "false"  # each other candidate measured alone


def test_a_rate_is_sustained_only_while_its_backlog_grows_by_at_most_a_tenth_of_the_messages_offered() -> None:
    assert bench_pipeline.sustained({"backlog": {"growth_share": 0.1}})
    assert bench_pipeline.sustained({"backlog": {"growth_share": -0.2}})
    assert not bench_pipeline.sustained({"backlog": {"growth_share": 0.1001}})
    assert not bench_pipeline.sustained({"error": "boom"})


def test_the_cpu_of_threads_is_counted_by_their_names_only() -> None:
    pid = os.getpid()
    main_name = Path(f"/proc/{pid}/task/{pid}/comm").read_text().strip()
    before = bench_pipeline.threads_cpu_s(pid, (main_name,))
    spent = time.process_time()
    assert sum(i * i for i in range(5_000_000)) > 0  # work on this (the main) thread
    spent = time.process_time() - spent
    assert bench_pipeline.threads_cpu_s(pid, (main_name,)) - before >= min(0.1, spent / 2)
    assert bench_pipeline.threads_cpu_s(pid, ("C2 CompilerThre",)) == 0.0  # no such thread in this process
