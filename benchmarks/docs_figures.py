"""How the benchmark figures read in docs/benchmarks.md: number formatting, the per-component table, and
the reading -- plain statements derived from the figures, so the page cannot claim what a run did not show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: What the webhook benchmark's floor does (benchmarks.floor_webhook), as its rows name it.
FLOOR_WEBHOOK = "signature, parse, one Kafka record and its confirmation, answer; nothing else"
COMPONENTS = ("worker", "transport", "kafka_clients", "half_load", "webhook", "bridge", "report", "sim")
CPU_BOUND = 0.85  # CPU seconds per second from which one worker process counts as saturated
ACK_QUEUED_MS = 1000  # an ack path (beyond the injected latency) this long is named by its longest part
ACK_PATH_PARTS = {
    "send_to_accepted_ms": "send to accepted (the worker's wait for a pooled HTTP connection, then the request)",
    "delivered_to_webhook_ms": "delivered to webhook (the simulator's callback sender and the webhook)",
    "webhook_to_worker_ms": "webhook to worker (Kafka and the worker's ack reader)",
}

Results = Mapping[str, Any]


def figure(value: Any, digits: int = 1) -> str:
    """A figure for a table: '—' when absent, thousands separated, ``digits`` decimals when not whole."""
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.{digits}f}"
    return f"{int(value):,}" if isinstance(value, int | float) else str(value)


def short_rooms(n: int) -> str:
    """A room count as the plots label it: 100, 1k, 25k."""
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def label(s: Mapping[str, Any]) -> str:
    """A scenario as the plots label it: ``25k @0.85``."""
    return f"{short_rooms(s['rooms'])} @{s['ack_rate']:g}"


def named(s: Mapping[str, Any]) -> str:
    """A scenario in a sentence: ``25,000 rooms at ack rate 0.85``."""
    return f"{s['rooms']:,} rooms at ack rate {s['ack_rate']:g}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A markdown table's lines, with the blank line after it."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def dig(data: Any, *path: str) -> Any:
    """The value at ``path`` in nested mappings; None where a key is missing."""
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def code_line(code: Any) -> str:
    """``commit <sha>`` of a run, with the source files it had changed on top, as recorded by the run."""
    if not isinstance(code, Mapping) or not code.get("commit"):
        return "commit not recorded"
    modified = code.get("modified") or []
    return f"commit {code['commit'][:12]}" + (
        f", plus uncommitted changes to {', '.join(f'`{m}`' for m in modified)}" if modified else ""
    )


def source(figures: Mapping[str, Any]) -> str:
    """Where a benchmark's figures come from: this run (with its commit, when the benchmark records it) or the
    file they were completed from."""
    if "_from" in figures:
        return f"`{figures['_from']}` (not this run)"
    return f"this run ({code_line(figures['code'])})" if "code" in figures else "this run"


def _runs(values: Any) -> str:
    """`` (runs a, b, ...)`` of a benchmark's single runs, when there was more than one."""
    if not isinstance(values, list) or len(values) < 2:
        return ""
    return f" (runs {', '.join(figure(v) for v in values)})"


def _baseline_runs(worker: Mapping[str, Any]) -> str:
    """Each baseline run's own figure, when there was more than one (older files: before and after the worker)."""
    if runs := _runs(dig(worker, "bare_post", "cpu_us_per_request_runs")):
        return runs
    pair = dig(worker, "bare_post", "cpu_us_per_request_before_and_after")
    if isinstance(pair, list) and len(pair) == 2:
        return f" (before {figure(pair[0])}, after {figure(pair[1])})"
    return ""


def _worker_runs(worker: Mapping[str, Any]) -> str:
    """Each worker run's own figure, when there was more than one."""
    runs = dig(worker, "worker", "runs")
    return _runs([r.get("worker_cpu_us_per_message") for r in runs] if isinstance(runs, list) else None)


def _round_ratios(worker: Mapping[str, Any], key: str = "ratio_vs_aiohttp") -> str:
    """Each round's ratio (a worker run against a baseline's runs on either side of it), when there were several
    (older files: ``ratio``)."""
    rounds = worker.get("rounds")
    if not isinstance(rounds, list) or len(rounds) < 2:
        return ""
    return f" (rounds {', '.join(figure(r.get(key, r.get('ratio')), 2) for r in rounds)})"


def _rate_row(name: str, figures: Mapping[str, Any], keys: tuple[str, str, str], baseline_unit: str) -> list[str]:
    """A component's row with no target: its rate, its same-run baseline (in ``baseline_unit``) and the ratio of
    the two (3 digits), read from ``figures`` under ``keys`` (rate, baseline, ratio)."""
    rate, baseline, ratio = keys
    return [
        name,
        figure(figures.get(rate)),
        f"{figure(figures.get(baseline))} {baseline_unit}",
        figure(figures.get(ratio), 3),
        "—",
        source(figures),
    ]


def components(results: Results) -> list[str]:
    """The other benchmarks' headline figures, each with its same-run baseline and target."""
    r: Mapping[str, Any] = results.get("results", {})
    rows: list[list[str]] = []
    if w := r.get("worker"):
        rows.append(
            [
                "worker CPU per delivered message vs bare aiohttp POST",
                f"{figure(dig(w, 'worker', 'worker_cpu_us_per_message'))} µs/msg{_worker_runs(w)}",
                f"{figure(dig(w, 'bare_post', 'cpu_us_per_request'))} µs/request{_baseline_runs(w)}",
                f"{figure(w.get('cpu_ratio_worker_vs_bare_post'), 2)}{_round_ratios(w)}",
                f"≤ {w['target_ratio']:g}" if w.get("target_ratio") is not None else "—",
                source(w),
            ]
        )
        if (own := w.get("bare_post_transport")) is not None:
            rows.append(
                [
                    "worker CPU per delivered message vs bare POST through its own transport",
                    f"{figure(dig(w, 'worker', 'worker_cpu_us_per_message'))} µs/msg",
                    f"{figure(own.get('cpu_us_per_request'))} µs/request{_runs(own.get('cpu_us_per_request_runs'))}",
                    f"{figure(w.get('cpu_ratio_worker_vs_bare_post_transport'), 2)}"
                    + _round_ratios(w, "ratio_vs_inturn"),
                    f"≤ {figure(w.get('target_ratio_transport'))}",
                    source(w),
                ]
            )
        if (floor := w.get("floor")) is not None:
            rows.append(
                [
                    "the floor (benchmarks/floor_worker.py: decode, render, POST, read its acks-topic statuses, "
                    "write one event; no ordering) vs bare POST through the transport",
                    f"{figure(floor.get('cpu_us_per_request'))} µs/msg{_runs(floor.get('cpu_us_per_request_runs'))}",
                    f"{figure(dig(w, 'bare_post_transport', 'cpu_us_per_request'))} µs/request",
                    f"{figure(w.get('cpu_ratio_floor_vs_bare_post_transport'), 2)}",
                    "—",
                    source(w),
                ]
            )
            if (kafka := w.get("floor_kafka_part")) is not None:
                rows.append(
                    [
                        "the floor's Kafka part alone (`floor_worker.py --without-post`: take and decode the message, "
                        "read its acks-topic statuses, write its event; every record already on its topic) vs bare "
                        "POST through the transport; a worker costs at least 1 + this",
                        f"{figure(kafka.get('cpu_us_per_request'))} µs/msg"
                        + _runs(kafka.get("cpu_us_per_request_runs")),
                        f"{figure(dig(w, 'bare_post_transport', 'cpu_us_per_request'))} µs/request",
                        f"{figure(w.get('cpu_ratio_least_worker_vs_bare_post_transport'), 2)} (1 + "
                        f"{figure(kafka.get('cpu_us_per_request'))} / "
                        f"{figure(dig(w, 'bare_post_transport', 'cpu_us_per_request'))})",
                        "—",
                        source(w),
                    ]
                )
            rows.append(
                [
                    "worker CPU per delivered message vs the floor",
                    f"{figure(dig(w, 'worker', 'worker_cpu_us_per_message'))} µs/msg",
                    f"{figure(floor.get('cpu_us_per_request'))} µs/msg",
                    f"{figure(w.get('cpu_ratio_worker_vs_floor'), 2)}" + _round_ratios(w, "ratio_vs_floor"),
                    f"≤ {figure(w.get('target_ratio_floor'))}" if w.get("target_ratio_floor") is not None else "—",
                    source(w),
                ]
            )
            if (ordered := w.get("ordered_floor")) is not None:
                ordered_floors = {
                    "ordered_floor": "the ordered floor (`floor_worker.py --ordered`: the floor, each room's next send "
                    "only once its message before was acknowledged; no timeout, cursor, commit, dedup, metrics or "
                    "logs) vs the floor",
                    "ordered_floor_callbacks": "the ordered floor written with callbacks (`floor_worker.py "
                    "--callbacks`: no task or future of its own per room or message) vs the floor",
                }
                for key, label in ordered_floors.items():
                    if (runs := w.get(key)) is not None:
                        rows.append(
                            [
                                label,
                                f"{figure(runs.get('cpu_us_per_request'))} µs/msg"
                                + _runs(runs.get("cpu_us_per_request_runs")),
                                f"{figure(floor.get('cpu_us_per_request'))} µs/msg",
                                f"{figure(w.get(f'cpu_ratio_{key}_vs_floor'), 2)}",
                                "—",
                                source(w),
                            ]
                        )
                if (calls := w.get("calls_per_message")) is not None:
                    rows.append(
                        [
                            "Python calls per delivered message on the event loop (cProfile; functions called at least "
                            "once per two messages; built-ins in brackets), worker vs the ordered floor",
                            f"{figure(dig(calls, 'worker', 'python'))} ({figure(dig(calls, 'worker', 'builtin'))})",
                            f"{figure(dig(calls, 'ordered_floor', 'python'))} "
                            f"({figure(dig(calls, 'ordered_floor', 'builtin'))})",
                            f"{figure(calls.get('ratio_python_worker_vs_ordered_floor'), 2)}",
                            "—",
                            source(w),
                        ]
                    )
                rows.append(
                    [
                        "worker CPU per delivered message vs the ordered floor",
                        f"{figure(dig(w, 'worker', 'worker_cpu_us_per_message'))} µs/msg",
                        f"{figure(ordered.get('cpu_us_per_request'))} µs/msg",
                        f"{figure(w.get('cpu_ratio_worker_vs_ordered_floor'), 2)}"
                        + _round_ratios(w, "ratio_vs_ordered_floor"),
                        "—",
                        source(w),
                    ]
                )
        if (webhook := dig(w, "worker", "webhook_cpu_us_per_message")) is not None:
            rows.append(
                [
                    "webhook CPU per delivered message (the scenarios' webhook, the worker's window)",
                    f"{figure(webhook)} µs/msg{_runs(dig(w, 'worker', 'webhook_cpu_us_per_message_runs'))}",
                    "—",
                    "—",
                    "—",
                    source(w),
                ]
            )
        if (records := w.get("records_per_message")) is not None:
            rows.append(
                [
                    "records the worker wrote per delivered message (events + dead letters, from the topics)",
                    figure(records, 2),
                    "—",
                    "—",
                    f"{figure(w.get('target_records_per_message'))}",
                    source(w),
                ]
            )
        rows.append(
            [
                f"worker RSS, {figure(dig(w, 'rooms_in_flight', 'rooms'))} rooms in flight",
                f"{figure(dig(w, 'rooms_in_flight', 'worker_rss_mb'))} MiB",
                "—",
                "—",
                f"≤ {figure(w.get('target_rss_mb'))} MiB",
                source(w),
            ]
        )
    if h := r.get("webhook"):
        rows.append(
            [
                "webhook statuses/s, batched callbacks",
                figure(dig(h, "batched", "statuses_per_s")),
                f"{figure(dig(h, 'baseline_healthz', 'requests_per_s'))} /healthz req/s",
                figure(h.get("batched_statuses_per_s_vs_target"), 2) + " of target",
                f"≥ {figure(h.get('target_statuses_per_s'))}",
                source(h),
            ]
        )
        single_target = h.get("target_single_vs_baseline")
        rows.append(
            [
                "webhook statuses/s, one status per callback",
                figure(dig(h, "single", "statuses_per_s")),
                f"{figure(dig(h, 'baseline_healthz', 'requests_per_s'))} /healthz req/s",
                figure(h.get("single_vs_baseline_request_ratio"), 3),
                f"≥ {single_target}, ≥ {figure(h.get('target_single_per_s'))}/s" if single_target else "—",
                source(h),
            ]
        )
        for server, seen in (h.get("servers") or {}).items():
            if "skipped" in seen:
                continue
            served = (
                f"the floor ({FLOOR_WEBHOOK}) under {server.removeprefix('floor_')}"
                if server.startswith("floor_")
                else f"webhook under {server}"
            )
            rows.append(
                [
                    f"{served}: one-status callbacks/s (server CPU µs per callback / per /healthz)",
                    f"{figure(seen.get('single_callbacks_per_s'))} ({figure(seen.get('single_server_cpu_us'))} µs)",
                    f"{figure(seen.get('healthz_requests_per_s'))} /healthz req/s "
                    f"({figure(seen.get('healthz_server_cpu_us'))} µs)",
                    figure(seen.get("single_vs_baseline_request_ratio"), 3),
                    "—",
                    source(h),
                ]
            )
    if b := r.get("bridge"):
        rows.append(
            _rate_row(
                "bridge messages/s (Pub/Sub → Kafka)",
                b,
                ("bridge_msgs_per_s", "baseline_ack_only_msgs_per_s", "bridge_over_baseline"),
                "msg/s bare subscriber",
            )
        )
    if p := r.get("report"):
        rows.append(
            [
                f"Spark report over {figure(p.get('events'))} events",
                f"{figure(dig(p, 'report', 'seconds'))} s{_runs(dig(p, 'report', 'runs_s'))}, "
                f"peak {figure(dig(p, 'report', 'peak_rss_mb'))} MiB",
                f"{figure(dig(p, 'baseline_scan', 'seconds'))} s plain scan{_runs(dig(p, 'baseline_scan', 'runs_s'))}",
                figure(p.get("ratio_report_to_scan"), 2),
                f"≤ {figure(p.get('target_ratio'))}x"
                if "target_ratio" in p
                else f"≤ {figure(p.get('target_seconds'))} s",
                source(p),
            ]
        )
    if p and (floor := p.get("floor")) is not None:
        rows.append(
            [
                "the report's floor (`bench_report floor`: scan, one shuffle of events and acks by room; nothing "
                "else) vs the plain scan",
                f"{figure(floor.get('seconds'))} s",
                f"{figure(dig(p, 'baseline_scan', 'seconds'))} s plain scan",
                figure(p.get("ratio_floor_to_scan"), 2),
                "—",
                source(p),
            ]
        )
    if s := r.get("sim"):
        rows.append(
            _rate_row(
                "platform simulator sends/s",
                s,
                ("msgs_per_s", "baseline_client_ceiling_msgs_per_s", "ratio_to_client_ceiling"),
                "msg/s client ceiling",
            )
        )
    out = ["## Per-component figures", ""]
    out += [
        "From the other benchmarks (`benchmarks/bench_<name>.py`); each ratio is against a baseline measured in "
        "the same run of that benchmark. The worker's CPU (its process, from /proc) is measured in rounds, each a "
        "worker run followed by a run of each baseline: a bare aiohttp client, and a bare client on the adapters' "
        "own transport (`benchmarks/bare_post.py`, its own CPU from getrusage), both POSTing the same body to the "
        "same simulator with the worker's pool of connections; each ratio is over all runs, and each round's own "
        "ratio (against the baseline runs on either side of it) shows the spread. The bare POST through the "
        "transport is the lower bound of the send itself: the worker against it is everything else it does.",
        "",
    ]
    if not rows:
        return [*out, "None of them is in these results.", ""]
    return out + table(["figure", "value", "baseline", "ratio", "target", "measured in"], rows)


def reading(results: Results) -> list[str]:
    """Plain statements derived from the figures: what is met and what is not."""
    r: Mapping[str, Any] = results.get("results", {})
    matrix: Mapping[str, Any] = r.get("matrix") or {}
    ok = [s for s in matrix.get("scenarios", []) if "error" not in s]
    lines: list[str] = []
    machine: Mapping[str, Any] = matrix.get("machine") or {}
    load, cpus = (machine.get("load_average_at_start") or [None])[0], machine.get("cpus")
    if load is not None and cpus and load > cpus:
        lines.append(
            f"The machine was shared: load average {load:g} on {cpus} CPUs when the matrix started. Absolute rates "
            "are lower than on an idle machine; the ratios compare figures measured side by side in the same run."
        )
    if ok:
        lines += matrix_reading(ok, matrix.get("setup", {}))
    if failed := [s["name"] for s in matrix.get("scenarios", []) if "error" in s]:
        lines.append(f"Not measured: scenarios {', '.join(failed)} failed (error in results.json).")
    w = r.get("worker")
    for key, target_key, baseline in (
        ("cpu_ratio_worker_vs_bare_post", "target_ratio", "a bare aiohttp POST"),
        ("cpu_ratio_worker_vs_bare_post_transport", "target_ratio_transport", "a bare POST through its transport"),
    ):
        if w and (ratio := w.get(key)) is not None:
            target = w.get(target_key)
            verdict = "met" if target is not None and ratio <= target else "not met"
            lines.append(
                f"Worker CPU per message against {baseline}: {ratio:g}x, target ≤ {target}: {verdict}" + _earlier(w)
            )
    if w and (floor_ratio := w.get("cpu_ratio_floor_vs_bare_post_transport")) is not None:
        transport_target = w.get("target_ratio_transport")
        below = (
            f", above the transport target of {transport_target}x: no worker that reads its messages and statuses "
            "from Kafka and writes its outcomes there meets that target on this machine"
            if transport_target is not None and floor_ratio > transport_target
            else ""
        )
        worker_ratio, floor_target = w.get("cpu_ratio_worker_vs_floor"), w.get("target_ratio_floor")
        judged = (
            f", target ≤ {floor_target}: {'met' if worker_ratio <= floor_target else 'not met'}"
            if worker_ratio is not None and floor_target is not None
            else ""
        )
        lines.append(
            "The floor (decode, render, POST, read its acks-topic statuses, write one event; no ordering) cost "
            f"{floor_ratio:g}x a bare POST through the transport{below}; "
            f"the worker cost {worker_ratio}x the floor{judged}" + _earlier(w)
        )
        if (ordered_ratio := w.get("cpu_ratio_ordered_floor_vs_floor")) is not None:
            lines.append(
                "The ordered floor (the floor, each room's next send only once its message before was acknowledged) "
                f"cost {ordered_ratio:g}x the floor"
                + (
                    f" ({callbacks_ratio:g}x written with callbacks, without a task or future per room or message)"
                    if (callbacks_ratio := w.get("cpu_ratio_ordered_floor_callbacks_vs_floor")) is not None
                    else ""
                )
                + ": what waiting for each ack adds to it by itself; the "
                f"worker cost {w.get('cpu_ratio_worker_vs_ordered_floor')}x the ordered floor (its timeouts, cursors, "
                "commits, dedup, metrics and logs"
                + (
                    f": {dig(calls, 'worker', 'python')} Python calls per message on its event loop against "
                    f"{dig(calls, 'ordered_floor', 'python')}"
                    if (calls := w.get("calls_per_message")) is not None
                    else ""
                )
                + ")"
                + _earlier(w)
            )
    if w and (least := w.get("cpu_ratio_least_worker_vs_bare_post_transport")) is not None:
        transport_target = w.get("target_ratio_transport")
        verdict = (
            f", above the target of {transport_target}x before any ordering, retry or bookkeeping"
            if transport_target is not None and least > transport_target
            else ""
        )
        kafka_us = dig(w, "floor_kafka_part", "cpu_us_per_request")
        lines.append(
            "The floor's Kafka part alone (take and decode the message, read its acks-topic statuses, write its "
            f"event; no rendering, no POST; every record already on its topic) cost {kafka_us:.1f} µs "
            f"per message: a worker costs at least {least:g}x a bare POST through the transport{verdict}" + _earlier(w)
        )
    if w and (records := w.get("records_per_message")) is not None:
        target = w.get("target_records_per_message")
        verdict = "met" if target is not None and records <= target else "not met"
        lines.append(
            f"Records the worker wrote per delivered message: {records:g}, target {target}: {verdict}" + _earlier(w)
        )
    if w and (rss := dig(w, "rooms_in_flight", "worker_rss_mb")) is not None:
        target = w.get("target_rss_mb")
        verdict = "met" if target is not None and rss <= target else "not met"
        rooms = figure(dig(w, "rooms_in_flight", "rooms"))
        lines.append(
            f"Worker RSS with {rooms} rooms in flight: {rss:g} MiB, target ≤ {target} MiB: {verdict}" + _earlier(w)
        )
    if (h := r.get("webhook")) and (rate := dig(h, "batched", "statuses_per_s")) is not None:
        target = h.get("target_statuses_per_s")
        verdict = "met" if target is not None and rate >= target else "not met"
        lines.append(f"Webhook, batched callbacks: {rate:,.0f} statuses/s, target ≥ {target}: {verdict}" + _earlier(h))
    if (h := r.get("webhook")) and h.get("target_single_per_s") and h.get("single_vs_baseline_request_ratio"):
        ratio, rate = h["single_vs_baseline_request_ratio"], dig(h, "single", "requests_per_s")
        floor, least = h["target_single_vs_baseline"], h["target_single_per_s"]
        met = ratio >= floor and rate >= least
        lowest = (
            f"; the floor ({FLOOR_WEBHOOK}) {h['floor_single_vs_baseline_request_ratio']:g}x its own, the webhook "
            f"{h['single_cpu_vs_floor']:g}x the floor's CPU per callback"
            if h.get("floor_single_vs_baseline_request_ratio")
            else ""
        )
        lines.append(
            f"Webhook, one status per callback: {rate:,.0f}/s, {ratio:g}x its own /healthz rate, target ≥ {floor}x "
            f"and ≥ {least:,}/s: {'met' if met else 'not met'}{lowest}" + _earlier(h)
        )
    if (p := r.get("report")) and (seconds := dig(p, "report", "seconds")) is not None:
        lines.append(_report_reading(p, seconds))
    return lines


def _report_reading(p: Mapping[str, Any], seconds: float) -> str:
    """The report's line: its time against the plain scan's (or, in older results, a time target) and its peak
    memory against its ceiling."""
    load = f"(measured with load average {figure(p.get('load_average_1m'))})"
    events = figure(p.get("events"))
    if (target := p.get("target_ratio")) is None:
        target = p.get("target_seconds")
        verdict = "met" if target is not None and seconds <= target else "not met"
        return f"Spark report over {events} events: {seconds:g} s, target ≤ {target} s: {verdict} {load}" + _earlier(p)
    ratio = p.get("ratio_report_to_scan")
    verdict = "met" if ratio is not None and ratio <= target else "not met"
    line = f"Spark report over {events} events: {seconds:g} s, {ratio:g}x a plain scan, target ≤ {target}x: {verdict}"
    if (peak := dig(p, "report", "peak_rss_mb")) is not None and (ceiling := p.get("peak_ceiling_mb")) is not None:
        higher = "no higher than" if peak <= ceiling else "higher than"
        line += f"; peak memory {peak:g} MiB, {higher} its {ceiling:g} MiB ceiling (issue 21's report)"
    if (floor := p.get("ratio_floor_to_scan")) is not None:
        line += f"; its floor (scan and one shuffle by room; nothing else) took {floor:g}x the scan"
    return f"{line} {load}" + _earlier(p)


def _earlier(figures: Mapping[str, Any]) -> str:
    """`` (figures of <file of date>)`` for figures completed from an earlier run, else ``.``."""
    return f" ({figures['_from']})." if "_from" in figures else "."


def span(values: Sequence[float], digits: int = 2) -> str:
    """``low to high`` of ``values`` (one number when they round alike)."""
    low, high = min(values), max(values)
    return (
        f"{low:.{digits}f}" if round(low, digits) == round(high, digits) else f"{low:.{digits}f} to {high:.{digits}f}"
    )


def matrix_reading(ok: Sequence[Mapping[str, Any]], setup: Mapping[str, Any]) -> list[str]:
    """The reading of the scenarios that ran: order, losses, ack vs partition vs raw, latency, CPU, rooms."""
    lines: list[str] = []
    reordered = {s["name"]: s["ack"]["receipts"]["reordered"] for s in ok}
    # Inversions ack mode allows: the earlier message was still in transit when its ack timeout ended.
    allowed = {s["name"]: s["ack"]["receipts"].get("reordered_past_timeout", 0) for s in ok}
    unexplained = {name: n - allowed[name] for name, n in reordered.items() if n > allowed[name]}
    if not any(reordered.values()):
        lines.append(f"Order: 0 messages reordered at the device in ack mode in all {len(ok)} scenarios: met.")
    elif not unexplained:
        late = ", ".join(f"{name}: {n}" for name, n in reordered.items() if n)
        lines.append(
            f"Order: met. Ack mode reordered messages at the device only where the earlier message spent longer "
            f"than the ack timeout ({figure(setup.get('ack_timeout_ms'))} ms) between the platform's acceptance "
            f"and the device, by the simulator's receipts ({late}): its ack could not come in time, so the next "
            "message went after the timeout, as ack mode allows (docs/ordering-modes.md)."
        )
    else:
        bad = ", ".join(f"{name}: {n}" for name, n in unexplained.items())
        lines.append(
            "Order: NOT met, ack mode reordered messages at the device whose predecessor reached the device within "
            f"the ack timeout ({bad})."
        )
    lost = sum(s[m]["receipts"]["lost"] for s in ok for m in ("ack", "partition"))
    dupes = sum(s[m]["receipts"]["duplicated"] for s in ok for m in ("ack", "partition"))
    lines.append(f"Lost (a gap before a later message of its room): {lost}; duplicated: {dupes}, over both modes.")
    ack_part = [s["ack_over_partition"] for s in ok if s["ack_over_partition"] is not None]
    if ack_part:
        best = max(ok, key=lambda s: s["ack_over_partition"] or 0)
        partitions = float(setup.get("partitions") or 0)
        per_partition = [partitions / s["partition"]["msgs_per_s"] * 1000 for s in ok if s["partition"]["msgs_per_s"]]
        lines.append(
            f"Key-level ordering ('ack') delivered {span(ack_part, 1)} times the rate of partition-level ordering "
            f"on the same {setup.get('partitions')} partitions (most at {named(best)}): 'partition' mode has one "
            "message in flight per partition, so its rate is bounded by partitions / ack round trip whatever the "
            f"room count ({span(per_partition, 0)} ms per message per partition here)."
        )
    ack_raw = [s["ack_over_raw"] for s in ok if s["ack_over_raw"] is not None]
    cpu_ratio = [s["ack_cpu_over_raw_cpu"] for s in ok if s["ack_cpu_over_raw_cpu"] is not None]
    if ack_raw and cpu_ratio:
        lines.append(
            f"Against the raw HTTP loop, ack mode reached {span(ack_raw)} of its rate, spending "
            f"{span(cpu_ratio, 1)} times the raw loop's CPU per message."
        )
    faster = [s for s in ok if (s["ack_over_raw"] or 0) > 1 and (s["ack_cpu_over_raw_cpu"] or 0) < 1]
    if faster:
        each = ", ".join(
            f"{figure(s['rooms'])} rooms at ack rate {s['ack_rate']:g} ({figure(s['ack_over_raw'], 2)}: "
            f"{figure(s['raw']['cpu_us_per_request'])} µs per request against the worker's "
            f"{figure(s['ack']['worker_cpu_us_per_message'])} per message)"
            for s in faster
        )
        lines.append(
            f"Ack mode outpaced the raw loop at {each}: the raw loop is a bare aiohttp client, which spends more CPU "
            "per request than the worker per message, so where the box's CPU is short it is bound by its own CPU "
            "before the platform's rate."
        )
    lines += limits(ok, setup)
    turn_full = [s["ack"]["latency"]["turn_to_sent_ms"]["p99"] for s in ok if s["ack_rate"] >= 1]
    turn_lossy = [s["ack"]["latency"]["turn_to_sent_ms"]["p99"] for s in ok if s["ack_rate"] < 1]
    if all(v is not None for v in turn_full + turn_lossy) and turn_full:
        lines.append(
            f"The worker's own delay in ack mode, from a message's turn to its send: p99 {span(turn_full, 0)} ms "
            "at ack rate 1"
            + (
                f", {span(turn_lossy, 0)} ms with lost acks: after an ack timeout the room first waits until its "
                "cursor is durable in PostgreSQL (so that a new owner of the partition could not send the message "
                "again), which takes up to a checkpoint round."
                if turn_lossy
                else "."
            )
        )
    full = [s for s in ok if s["ack_rate"] >= 1]
    if spurious := sum(s["ack"]["latency"]["ack_timeouts"] for s in full):
        lines.append(
            f"{spurious} ack timeouts in ack mode at ack rate 1.0: acks slower than "
            f"{figure(setup.get('ack_timeout_ms'))} ms end to end on this loaded machine (the message was delivered; "
            "the room moved on without its ack)."
        )
    biggest = max(ok, key=lambda s: s["rooms"])
    lines.append(
        f"With {figure(biggest['rooms'])} rooms the worker held up to "
        f"{figure(biggest['partition']['peak_active_rooms'])} rooms with buffered messages at once in partition "
        f"mode ({figure(biggest['partition']['worker_peak_rss_mb'])} MiB peak RSS) and up to "
        f"{figure(biggest['ack']['peak_active_rooms'])} in ack mode ({figure(biggest['ack']['worker_peak_rss_mb'])} "
        "MiB), where rooms that sent their whole backlog leave the worker."
    )
    if any(s["partition"]["backlog_left_at_end"] == 0 or s["ack"]["backlog_left_at_end"] == 0 for s in ok):
        lines.append("Caution: a backlog drained before its window ended; that rate undercounts the mode.")
    return lines


def limits(ok: Sequence[Mapping[str, Any]], setup: Mapping[str, Any]) -> list[str]:
    """What bounded ack mode's rate in each scenario, judged from its own figures.

    A room's mean time per message is rooms / rate. When that is within 1.5x of its expected round trip
    (median injected latency + ack path p50 + turn-to-send p50 + lost-ack share x ack timeout), the rooms'
    round trips were the bound, and an ack path of a second or more is named by its longest part. Otherwise
    rooms sat waiting for the worker: its own CPU when it used near one CPU second per second; below that,
    the run does not say (the machine's CPUs are shared with every other process, which is not measured).
    """
    median = float(dig(setup, "latency_ms", "median") or 0)
    timeout = float(setup.get("ack_timeout_ms") or 0)
    trips, queued, busy, starved = [], [], [], []
    for s in ok:
        ack = s["ack"]
        la = ack["latency"]
        path = la["ack_at_worker_minus_injected_ms"]["p50"] or 0.0
        expected = median + path + (la["turn_to_sent_ms"]["p50"] or 0.0) + (1 - s["ack_rate"]) * timeout
        per_room = s["rooms"] / ack["msgs_per_s"] * 1000 if ack["msgs_per_s"] else float("inf")
        used = ack["worker_cpu_s"] / ack["window_s"] if ack["window_s"] else 0.0
        if per_room <= 1.5 * expected:
            trips.append(f"{named(s)} ({per_room:,.0f} ms per message per room, expected {expected:,.0f})")
            if path >= ACK_QUEUED_MS and any(dig(la, k, "p50") for k in ACK_PATH_PARTS):
                part = max(ACK_PATH_PARTS, key=lambda k: dig(la, k, "p50") or 0.0)
                queued.append(f"{named(s)}: {ACK_PATH_PARTS[part]}, p50 {(dig(la, part, 'p50') or 0) / 1000:.1f} s")
        elif used >= CPU_BOUND:
            busy.append(f"{named(s)} ({used:.2f} CPU s/s)")
        else:
            starved.append(
                f"{named(s)} ({per_room:,.0f} ms per message per room against {expected:,.0f}; "
                f"worker {used:.2f} CPU s/s, {figure(ack['peak_active_rooms'])} rooms active at most)"
            )
    lines = []
    if trips:
        lines.append(
            "Ack mode's rate was bound by the rooms' round trips (a room sends its next message after the previous "
            "one's ack or timeout) at " + ", ".join(trips) + "."
        )
    if queued:
        lines.append(
            "Where the ack path beyond the injected latency took a second or more (p50), its longest part: "
            + "; ".join(queued)
            + "."
        )
    if busy:
        lines.append("Ack mode's rate was bound by the worker's own CPU at " + ", ".join(busy) + ".")
    if starved:
        lines.append(
            "At " + ", ".join(starved) + " neither bound explains the rate: the worker used well under one CPU "
            "second per second, while the broker, simulator and webhook share the machine's CPUs with it; whether "
            "the worker waited for CPU time is not measured in this run."
        )
    return lines
