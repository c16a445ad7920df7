"""Write docs/benchmarks.md, its SVG plots and a copy of the figures from ``var/bench/results.json``.

``python -m benchmarks.write_docs`` after ``python -m benchmarks.run`` (``make bench`` runs both). A
benchmark missing from results.json (a partial run) is taken from its own ``var/bench/<name>.json``
when there is one, and the page says so and gives that file's date. The reading at the end is
derived from the figures, so it cannot claim what the run did not show.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from inturn_reports.charts import bar_chart

BENCH_DIR = Path("var/bench")
DOC = Path("docs/benchmarks.md")
PLOTS = Path("docs/benchmarks")
COMPONENTS = ("worker", "webhook", "bridge", "report", "sim")
CPU_BOUND = 0.85  # CPU seconds per second from which one worker process counts as saturated

_SVG_STYLE = (
    "<style>.grid{stroke:#e5e5e5}.axis{stroke:#444}"
    "text{font-family:sans-serif;font-size:11px;fill:#333}</style>"
    '<rect width="100%" height="100%" fill="#fff"/>'
)

Results = Mapping[str, Any]


def load(bench_dir: Path) -> dict[str, Any]:
    """results.json, completed from the per-benchmark files for benchmarks it lacks (marked ``_from``)."""
    results: dict[str, Any] = json.loads((bench_dir / "results.json").read_text())
    ran = sorted(results.get("results", {}))
    results["ran"] = ran
    for name in ("matrix", *COMPONENTS):
        single = bench_dir / f"{name}.json"
        if name not in results["results"] and single.exists():
            figures = json.loads(single.read_text())
            figures["_from"] = f"{single} of {time.strftime('%Y-%m-%d %H:%M', time.gmtime(single.stat().st_mtime))} UTC"
            results["results"][name] = figures
    return results


def standalone_svg(figure: str) -> str:
    """A ``bar_chart`` figure as an SVG file: the ``<svg>`` element alone, with the styles it relies on."""
    match = re.search(r"(<svg[^>]*>)(.*</svg>)", figure, re.S)
    if match is None:
        raise ValueError("not a bar_chart figure: no <svg> element")
    return f"{match.group(1)}{_SVG_STYLE}{match.group(2)}\n"


def _v(value: Any, digits: int = 1) -> str:
    """A figure for a table: '—' when absent, thousands separated, ``digits`` decimals when not whole."""
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.{digits}f}"
    return f"{int(value):,}" if isinstance(value, int | float) else str(value)


def _rooms(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def _label(s: Mapping[str, Any]) -> str:
    return f"{_rooms(s['rooms'])} @{s['ack_rate']:g}"


def _named(s: Mapping[str, Any]) -> str:
    return f"{s['rooms']:,} rooms at ack rate {s['ack_rate']:g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def plots(scenarios: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The SVG files (name -> content) of the matrix: throughput, added latency, CPU and RSS."""
    ok = [s for s in scenarios if "error" not in s]
    labels = [_label(s) for s in ok]

    def series(*path: str) -> list[float]:
        return [float(_get(s, *path) or 0.0) for s in ok]

    def chart(name: str, title: str, data: dict[str, list[float]], fmt: Callable[[float], str]) -> str:
        return standalone_svg(bar_chart(name, title, labels, data, fmt=fmt))

    whole: Callable[[float], str] = lambda v: f"{v:,.0f}"  # noqa: E731 - a one-line formatter
    return {
        "throughput.svg": chart(
            "throughput",
            "Delivered messages/s (receipt log): ack vs partition mode vs raw HTTP loop",
            {
                "ack mode": series("ack", "msgs_per_s"),
                "partition mode": series("partition", "msgs_per_s"),
                "raw HTTP loop": series("raw", "msgs_per_s"),
            },
            whole,
        ),
        "latency.svg": chart(
            "latency",
            "Added latency in ack mode, ms",
            {
                "turn→sent p50": series("ack", "latency", "turn_to_sent_ms", "p50"),
                "turn→sent p99": series("ack", "latency", "turn_to_sent_ms", "p99"),
                "ack-injected p50": series("ack", "latency", "ack_at_worker_minus_injected_ms", "p50"),
                "ack-injected p99": series("ack", "latency", "ack_at_worker_minus_injected_ms", "p99"),
            },
            whole,
        ),
        "cpu.svg": chart(
            "cpu",
            "CPU µs per delivered message (worker) or per request (raw loop)",
            {
                "ack mode": series("ack", "worker_cpu_us_per_message"),
                "partition mode": series("partition", "worker_cpu_us_per_message"),
                "raw HTTP loop": series("raw", "cpu_us_per_request"),
            },
            whole,
        ),
        "rss.svg": chart(
            "rss",
            "Worker RSS at the end of the window, MiB",
            {"ack mode": series("ack", "worker_rss_mb"), "partition mode": series("partition", "worker_rss_mb")},
            whole,
        ),
    }


def _command(results: Results) -> str:
    matrix = _get(results, "results", "matrix") or {}
    ran = results.get("ran", [])
    quick = " --quick" if matrix.get("quick") else ""
    names = "" if set(ran) >= {"matrix", *COMPONENTS} else " " + " ".join(ran)
    return f".venv/bin/python -m benchmarks.run{names}{quick} && .venv/bin/python -m benchmarks.write_docs"


def render(results: Results, plots_rel: str = "benchmarks") -> str:
    """The markdown page (plots linked under ``plots_rel``, relative to the page)."""
    matrix: Mapping[str, Any] = _get(results, "results", "matrix") or {}
    scenarios: list[Mapping[str, Any]] = list(matrix.get("scenarios", []))
    ok = [s for s in scenarios if "error" not in s]
    machine: Mapping[str, Any] = matrix.get("machine") or results.get("machine") or {}
    setup: Mapping[str, Any] = matrix.get("setup", {})
    lat = setup.get("latency_ms", {})
    out = [
        "# Benchmarks",
        "",
        "Generated by `benchmarks/write_docs.py` from `var/bench/results.json`; do not edit by hand, run "
        "`make bench` (or the command below). The figures used are in "
        f"[{plots_rel}/results.json]({plots_rel}/results.json).",
        "",
        "## The run",
        "",
        f"- Date: {matrix.get('started_utc', results.get('date', '—'))} UTC"
        + (f", the matrix took {_v(matrix.get('duration_s'))} s" if matrix else ""),
        f"- Command: `{_command(results)}`",
        f"- Machine: {machine.get('cpus', '—')} CPUs ({machine.get('cpu_model', 'model not recorded')}), "
        f"{_v(machine.get('ram_gb'))} GB RAM, {machine.get('platform', '—')}",
        f"- Python {machine.get('python', '—')}, Kafka {machine.get('kafka', '—')} (one KRaft broker on loopback), "
        "PostgreSQL (Debian's, on loopback); every service a separate process on the same machine",
        f"- Load average (1, 5, 15 min) at the start: {_loads(machine.get('load_average_at_start'))}, "
        f"at the end: {_loads(machine.get('load_average_at_end'))}",
        "",
    ]
    if matrix:
        out += _matrix_sections(matrix, scenarios, ok, setup, lat, plots_rel)
    else:
        out += ["The scenario matrix is not in these results.", ""]
    out += _components(results)
    out += ["## Reading", "", *(f"- {line}" for line in reading(results)), ""]
    return "\n".join(out)


def _loads(values: Any) -> str:
    return ", ".join(f"{v:g}" for v in values) if values else "—"


def _matrix_sections(
    matrix: Mapping[str, Any],
    scenarios: Sequence[Mapping[str, Any]],
    ok: Sequence[Mapping[str, Any]],
    setup: Mapping[str, Any],
    lat: Mapping[str, Any],
    rel: str,
) -> list[str]:
    rates = ", ".join(f"{r:g} (drop rate {1 - r:.2f})" for r in setup.get("ack_rates", []))
    out = [
        "## The scenario matrix",
        "",
        f"- Rooms: {', '.join(_v(n) for n in sorted({s['rooms'] for s in scenarios})) or '—'}; ack rates {rates}; "
        f"{_v(setup.get('payload_bytes'))}-byte messages; {setup.get('partitions')} partitions on every topic; "
        f"{setup.get('workers', 1)} worker.",
        f"- Platform latency: lognormal, median {lat.get('median')} ms, p99 {lat.get('p99')} ms, capped at "
        f"{lat.get('max')} ms (the simulator's draw from acceptance to the device). A lost ack is the simulator "
        f"dropping every callback of a message; the worker then waits its ack timeout, "
        f"{_v(setup.get('ack_timeout_ms'))} ms, and moves on.",
        f"- Each scenario: a backlog of at least {_v(setup.get('backlog_min'))} messages (2 per room at least), "
        "rooms interleaved, produced once to one topic per mode; for each mode a fresh simulator, webhook and worker. "
        f"After the first send reaches the simulator and a warm-up ({_v(setup.get('warmup_s'))} s plus "
        f"{_v(setup.get('warmup_s_per_room', 0) * 1000, 2)} s per 1,000 rooms), the sends the "
        f"simulator accepted in a {_v(setup.get('window_s'))} s window are counted from its receipt log; then "
        "everything stops without waiting for the backlog to drain ('partition' mode would take hours).",
        "- The worker holds every room at once: its high watermark is max(5000, 2 x rooms) buffered messages.",
        f"- Raw HTTP loop: `benchmarks/bare_post.py`, {_v(setup.get('raw_requests'))} POSTs of the same 1 KB body "
        f"to the same simulator (which calls the same webhook back), concurrency = rooms capped at "
        f"{setup.get('raw_concurrency_cap')} (the worker's HTTP pool), no Kafka and no ordering on the send side; "
        "rate = sends the simulator accepted / the client's wall time.",
        "",
    ]
    if len(ok) < len(scenarios):
        out += ["**Failed scenarios:** " + "; ".join(f"{s['name']}: {s['error']}" for s in scenarios if "error" in s)]
        out += [""]
    out += ["### Throughput", ""]
    out += _table(
        [
            "rooms",
            "ack rate",
            "ack msg/s",
            "partition msg/s",
            "raw msg/s",
            "ack / partition",
            "ack / raw",
            "partition / raw",
        ],
        [
            [
                _v(s["rooms"]),
                f"{s['ack_rate']:g}",
                _v(s["ack"]["msgs_per_s"]),
                _v(s["partition"]["msgs_per_s"]),
                _v(s["raw"]["msgs_per_s"]),
                _v(s["ack_over_partition"], 2),
                _v(s["ack_over_raw"], 3),
                _v(s["partition_over_raw"], 3),
            ]
            for s in ok
        ],
    )
    out += [f"![Throughput per scenario]({rel}/throughput.svg)", "", "### Added latency", ""]
    out += [
        "Milliseconds, p50 / p99 over the messages sent in the window. *consumed→sent*: sent_at_ms - consumed_at_ms "
        "of the worker's `dispatched` events; with a standing backlog it is mostly the wait behind the room's "
        "earlier messages (and in 'partition' mode behind the partition's). *turn→sent*: from the moment the "
        "message could go (the later of its consumption and the terminal event of the room's previous message; in "
        "'partition' mode also of the partition's previous one) to its send: the worker's own delay. "
        "*ack-injected*: (ack time - sent_at_ms) minus the latency the simulator injected for that message "
        "(delivered_at_ms - accepted_at_ms of its receipt); at the webhook the ack time is its acked_at_ms (the "
        "webhook received the callback), at the worker it is the `acked` event's ts_ms (the worker read the ack "
        "from Kafka and resolved the message). It covers the send's HTTP round trip, the simulator's callback, the "
        "webhook, Kafka and the worker's ack reader.",
        "",
    ]
    rows = []
    for s in ok:
        for mode in ("ack", "partition"):
            la = s[mode]["latency"]
            rows.append(
                [_v(s["rooms"]), f"{s['ack_rate']:g}", mode]
                + [
                    f"{_v(la[k]['p50'])} / {_v(la[k]['p99'])}"
                    for k in (
                        "consumed_to_sent_ms",
                        "turn_to_sent_ms",
                        "ack_at_webhook_minus_injected_ms",
                        "ack_at_worker_minus_injected_ms",
                    )
                ]
                + [_v(la["ack_timeouts"])]
            )
    out += _table(
        [
            "rooms",
            "ack rate",
            "mode",
            "consumed→sent",
            "turn→sent",
            "ack-injected at webhook",
            "ack-injected at worker",
            "ack timeouts",
        ],
        rows,
    )
    out += [f"![Added latency in ack mode]({rel}/latency.svg)", "", "### Worker cost", ""]
    out += [
        "CPU time of the worker process over the window (from /proc) per message the simulator accepted in the "
        "window; the raw loop's is its own CPU per request (getrusage). RSS at the end of the window (peak in "
        "brackets); active rooms: the worker's `inturn_worker_active_rooms` gauge, highest value read.",
        "",
    ]
    out += _table(
        [
            "rooms",
            "ack rate",
            "ack CPU µs/msg",
            "partition CPU µs/msg",
            "raw CPU µs/request",
            "ack CPU / raw CPU",
            "ack RSS MiB",
            "partition RSS MiB",
            "active rooms (ack)",
        ],
        [
            [
                _v(s["rooms"]),
                f"{s['ack_rate']:g}",
                _v(s["ack"]["worker_cpu_us_per_message"]),
                _v(s["partition"]["worker_cpu_us_per_message"]),
                _v(s["raw"]["cpu_us_per_request"]),
                _v(s["ack_cpu_over_raw_cpu"], 2),
                f"{_v(s['ack']['worker_rss_mb'])} ({_v(s['ack']['worker_peak_rss_mb'])})",
                f"{_v(s['partition']['worker_rss_mb'])} ({_v(s['partition']['worker_peak_rss_mb'])})",
                _v(s["ack"]["peak_active_rooms"]),
            ]
            for s in ok
        ],
    )
    out += [f"![CPU per message]({rel}/cpu.svg)", "", f"![Worker RSS]({rel}/rss.svg)", "", "### Receipt checker", ""]
    out += [
        "`inturn.receipts.check` over each mode's whole receipt log against the produced room order. The run stops "
        "before the backlog drains, so *lost* counts only messages missing before a later message of the same room "
        "that arrived; *not yet sent* is the backlog left when the window ended.",
        "",
    ]
    out += _table(
        ["rooms", "ack rate", "mode", "received", "lost", "reordered", "duplicated", "not yet sent"],
        [
            [_v(s["rooms"]), f"{s['ack_rate']:g}", mode]
            + [_v(s[mode]["receipts"][k]) for k in ("received", "lost", "reordered", "duplicated", "not_yet_sent")]
            for s in ok
            for mode in ("ack", "partition")
        ],
    )
    return out


def _source(figures: Mapping[str, Any]) -> str:
    return f"`{figures['_from']}` (not this run)" if "_from" in figures else "this run"


def _components(results: Results) -> list[str]:
    """The other benchmarks' headline figures, each with its same-run baseline and target."""
    r: Mapping[str, Any] = results.get("results", {})
    rows: list[list[str]] = []
    if w := r.get("worker"):
        rows.append(
            [
                "worker CPU per delivered message vs bare POST",
                f"{_v(_get(w, 'worker', 'worker_cpu_us_per_message'))} µs/msg",
                f"{_v(_get(w, 'bare_post', 'cpu_us_per_request'))} µs/request",
                _v(w.get("cpu_ratio_worker_vs_bare_post"), 2),
                f"≤ {_v(w.get('target_ratio'))}",
                _source(w),
            ]
        )
        rows.append(
            [
                f"worker RSS, {_v(_get(w, 'rooms_in_flight', 'rooms'))} rooms in flight",
                f"{_v(_get(w, 'rooms_in_flight', 'worker_rss_mb'))} MiB",
                "—",
                "—",
                f"≤ {_v(w.get('target_rss_mb'))} MiB",
                _source(w),
            ]
        )
    if h := r.get("webhook"):
        rows.append(
            [
                "webhook statuses/s, batched callbacks",
                _v(_get(h, "batched", "statuses_per_s")),
                f"{_v(_get(h, 'baseline_healthz', 'requests_per_s'))} /healthz req/s",
                _v(h.get("batched_statuses_per_s_vs_target"), 2) + " of target",
                f"≥ {_v(h.get('target_statuses_per_s'))}",
                _source(h),
            ]
        )
        rows.append(
            [
                "webhook statuses/s, one status per callback",
                _v(_get(h, "single", "statuses_per_s")),
                f"{_v(_get(h, 'baseline_healthz', 'requests_per_s'))} /healthz req/s",
                _v(h.get("single_vs_baseline_request_ratio"), 3),
                "—",
                _source(h),
            ]
        )
    if b := r.get("bridge"):
        rows.append(
            [
                "bridge messages/s (Pub/Sub → Kafka)",
                _v(b.get("bridge_msgs_per_s")),
                f"{_v(b.get('baseline_ack_only_msgs_per_s'))} msg/s bare subscriber",
                _v(b.get("bridge_over_baseline"), 3),
                "—",
                _source(b),
            ]
        )
    if p := r.get("report"):
        rows.append(
            [
                f"Spark report over {_v(p.get('events'))} events",
                f"{_v(_get(p, 'report', 'seconds'))} s",
                f"{_v(_get(p, 'baseline_scan', 'seconds'))} s plain scan",
                _v(p.get("ratio_report_to_scan"), 2),
                f"≤ {_v(p.get('target_seconds'))} s",
                _source(p),
            ]
        )
    if s := r.get("sim"):
        rows.append(
            [
                "platform simulator sends/s",
                _v(s.get("msgs_per_s")),
                f"{_v(s.get('baseline_client_ceiling_msgs_per_s'))} msg/s client ceiling",
                _v(s.get("ratio_to_client_ceiling"), 3),
                "—",
                _source(s),
            ]
        )
    out = ["## Per-component figures", ""]
    out += [
        "From the other benchmarks (`benchmarks/bench_<name>.py`); each ratio is against a baseline measured in "
        "the same run of that benchmark.",
        "",
    ]
    if not rows:
        return [*out, "None of them is in these results.", ""]
    return out + _table(["figure", "value", "baseline", "ratio", "target", "measured in"], rows)


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
        lines += _matrix_reading(ok, matrix.get("setup", {}))
    if failed := [s["name"] for s in matrix.get("scenarios", []) if "error" in s]:
        lines.append(f"Not measured: scenarios {', '.join(failed)} failed (error in results.json).")
    if (w := r.get("worker")) and (ratio := w.get("cpu_ratio_worker_vs_bare_post")) is not None:
        target = w.get("target_ratio")
        verdict = "met" if target is not None and ratio <= target else "not met"
        lines.append(f"Worker CPU per message against a bare POST: {ratio:g}x, target ≤ {target}: {verdict}.")
    if w and (rss := _get(w, "rooms_in_flight", "worker_rss_mb")) is not None:
        target = w.get("target_rss_mb")
        verdict = "met" if target is not None and rss <= target else "not met"
        rooms = _v(_get(w, "rooms_in_flight", "rooms"))
        lines.append(f"Worker RSS with {rooms} rooms in flight: {rss:g} MiB, target ≤ {target} MiB: {verdict}.")
    if (h := r.get("webhook")) and (rate := _get(h, "batched", "statuses_per_s")) is not None:
        target = h.get("target_statuses_per_s")
        verdict = "met" if target is not None and rate >= target else "not met"
        lines.append(f"Webhook, batched callbacks: {rate:,.0f} statuses/s, target ≥ {target}: {verdict}.")
    if (p := r.get("report")) and (seconds := _get(p, "report", "seconds")) is not None:
        target = p.get("target_seconds")
        verdict = "met" if target is not None and seconds <= target else "not met"
        lines.append(
            f"Spark report over {_v(p.get('events'))} events: {seconds:g} s, target ≤ {target} s: {verdict} "
            f"(measured with load average {_v(p.get('load_average_1m'))})."
        )
    return lines


def _span(values: Sequence[float], digits: int = 2) -> str:
    low, high = min(values), max(values)
    return (
        f"{low:.{digits}f}" if round(low, digits) == round(high, digits) else f"{low:.{digits}f} to {high:.{digits}f}"
    )


def _matrix_reading(ok: Sequence[Mapping[str, Any]], setup: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    reordered = {s["name"]: s["ack"]["receipts"]["reordered"] for s in ok}
    if not any(reordered.values()):
        lines.append(f"Order: 0 messages reordered at the device in ack mode in all {len(ok)} scenarios: met.")
    else:
        bad = ", ".join(f"{name}: {n}" for name, n in reordered.items() if n)
        lines.append(f"Order: NOT met, ack mode reordered messages at the device ({bad}).")
    lost = sum(s[m]["receipts"]["lost"] for s in ok for m in ("ack", "partition"))
    dupes = sum(s[m]["receipts"]["duplicated"] for s in ok for m in ("ack", "partition"))
    lines.append(f"Lost (a gap before a later message of its room): {lost}; duplicated: {dupes}, over both modes.")
    ack_part = [s["ack_over_partition"] for s in ok if s["ack_over_partition"] is not None]
    if ack_part:
        best = max(ok, key=lambda s: s["ack_over_partition"] or 0)
        lines.append(
            f"Key-level ordering ('ack') delivered {_span(ack_part, 1)} times the rate of partition-level ordering "
            f"on the same {setup.get('partitions')} partitions (most at {_named(best)}): 'partition' mode has one "
            "message in flight per partition, so its rate is bounded by partitions / ack round trip whatever the "
            "room count."
        )
    ack_raw = [s["ack_over_raw"] for s in ok if s["ack_over_raw"] is not None]
    cpu_ratio = [s["ack_cpu_over_raw_cpu"] for s in ok if s["ack_cpu_over_raw_cpu"] is not None]
    if ack_raw and cpu_ratio:
        lines.append(
            f"Against the raw HTTP loop, ack mode reached {_span(ack_raw)} of its rate, spending "
            f"{_span(cpu_ratio, 1)} times the raw loop's CPU per message."
        )
    busy = {_named(s): s["ack"]["worker_cpu_s"] / s["ack"]["window_s"] for s in ok if s["ack"]["window_s"]}
    bound = [label for label, used in busy.items() if used >= CPU_BOUND]
    idle = [label for label, used in busy.items() if used < CPU_BOUND]
    if bound:
        lines.append(
            f"In ack mode the worker used {CPU_BOUND:g} CPU seconds per second or more at {', '.join(bound)}: there "
            "its single event loop, not the ordering, limits the rate (more worker processes would raise it)."
        )
    if idle:
        lines.append(
            f"At {', '.join(idle)} the worker used less than {CPU_BOUND:g} CPU seconds per second: the rate is bounded "
            "by rooms / (ack round trip), "
            "since each room waits for its ack before its next message."
        )
    turn = [s["ack"]["latency"]["turn_to_sent_ms"]["p99"] for s in ok]
    ack_lat = [s["ack"]["latency"]["ack_at_worker_minus_injected_ms"] for s in ok]
    if all(v is not None for v in turn) and all(a["p50"] is not None for a in ack_lat):
        lines.append(
            f"Added latency in ack mode: from a message's turn to its send p99 {_span(turn, 0)} ms; the ack path "
            f"beyond the platform's injected latency p50 {_span([a['p50'] for a in ack_lat], 0)} ms and p99 "
            f"{_span([a['p99'] for a in ack_lat], 0)} ms (send round trip, callback, webhook, Kafka, ack reader)."
        )
    full = [s for s in ok if s["ack_rate"] >= 1]
    if spurious := sum(s["ack"]["latency"]["ack_timeouts"] for s in full):
        lines.append(
            f"{spurious} ack timeouts in ack mode at ack rate 1.0: acks slower than "
            f"{_v(setup.get('ack_timeout_ms'))} ms end to end on this loaded machine (the message was delivered; "
            "the room moved on without its ack)."
        )
    biggest = max(ok, key=lambda s: s["rooms"])
    lines.append(
        f"With {_v(biggest['rooms'])} rooms the worker held up to {_v(biggest['ack']['peak_active_rooms'])} active "
        f"rooms in ack mode at {_v(biggest['ack']['worker_peak_rss_mb'])} MiB peak RSS."
    )
    if any(s["partition"]["backlog_left_at_end"] == 0 or s["ack"]["backlog_left_at_end"] == 0 for s in ok):
        lines.append("Caution: a backlog drained before its window ended; that rate undercounts the mode.")
    return lines


def write(results: Results, doc: Path, plots_dir: Path) -> list[Path]:
    """Write the page, its plots and the results copy; the paths written."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    written = []
    scenarios = _get(results, "results", "matrix", "scenarios") or []
    for name, svg in plots(scenarios).items():
        (plots_dir / name).write_text(svg)
        written.append(plots_dir / name)
    copy = plots_dir / "results.json"
    copy.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    rel = plots_dir.relative_to(doc.parent) if plots_dir.is_relative_to(doc.parent) else plots_dir.resolve()
    doc.write_text(render(results, str(rel)))
    return [*written, copy, doc]


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.write_docs [--bench-dir var/bench] [--doc docs/benchmarks.md] [--plots DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.write_docs", description=__doc__)
    parser.add_argument("--bench-dir", type=Path, default=BENCH_DIR)
    parser.add_argument("--doc", type=Path, default=DOC)
    parser.add_argument("--plots", type=Path, default=PLOTS)
    args = parser.parse_args(argv)
    if not (args.bench_dir / "results.json").exists():
        parser.error(f"{args.bench_dir / 'results.json'} not found: run `python -m benchmarks.run` first")
    for path in write(load(args.bench_dir), args.doc, args.plots):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
