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

from benchmarks.docs_figures import (
    COMPONENTS,
    Results,
    code_line,
    components,
    dig,
    figure,
    label,
    reading,
    table,
)
from benchmarks.pipeline_figures import pipeline_section, plot_series
from benchmarks.worker_figures import half_load_section, kafka_clients_section, transport_section, worker_reading
from inturn_reports.charts import bar_chart

BENCH_DIR = Path("var/bench")
DOC = Path("docs/benchmarks.md")
PLOTS = Path("docs/benchmarks")

_SVG_STYLE = (
    "<style>.grid{stroke:#e5e5e5}.axis{stroke:#444}"
    "text{font-family:sans-serif;font-size:11px;fill:#333}</style>"
    '<rect width="100%" height="100%" fill="#fff"/>'
)


def load(bench_dir: Path, kept: Path | None = None) -> dict[str, Any]:
    """results.json, completed from the per-benchmark files for benchmarks it lacks, then from ``kept`` (the figures
    the page was last written from, docs/benchmarks/results.json) for those still missing; each marked ``_from``.

    Without ``kept``, a partial run in a fresh checkout (``var/bench`` holding only what it ran) would write a page
    without the other benchmarks' figures."""
    results: dict[str, Any] = json.loads((bench_dir / "results.json").read_text())
    ran = sorted(results.get("results", {}))
    results["ran"] = ran
    earlier: dict[str, Any] = json.loads(kept.read_text()) if kept is not None and kept.exists() else {}
    for name in ("matrix", "pipeline", *COMPONENTS):
        single = bench_dir / f"{name}.json"
        if name in results["results"]:
            continue
        if single.exists():
            figures = json.loads(single.read_text())
            figures["_from"] = f"{single} of {time.strftime('%Y-%m-%d %H:%M', time.gmtime(single.stat().st_mtime))} UTC"
            results["results"][name] = figures
        elif name in earlier.get("results", {}):
            figures = earlier["results"][name]
            # Already marked when it came from a file then; otherwise it was part of that page's own run.
            figures.setdefault("_from", f"{kept}, the run of {earlier.get('date', 'an unrecorded date')}")
            results["results"][name] = figures
    return results


def standalone_svg(figure: str) -> str:
    """A ``bar_chart`` figure as an SVG file: the ``<svg>`` element alone, with the styles it relies on."""
    match = re.search(r"(<svg[^>]*>)(.*</svg>)", figure, re.S)
    if match is None:
        raise ValueError("not a bar_chart figure: no <svg> element")
    return f"{match.group(1)}{_SVG_STYLE}{match.group(2)}\n"


def pipeline_plot(pipeline: Mapping[str, Any]) -> str:
    """The pipeline benchmark's stacked bars: CPU µs per delivered message of broker, worker and webhook per variant."""
    labels, series = plot_series(pipeline)
    return standalone_svg(
        bar_chart(
            "pipeline",
            "CPU per delivered message (µs), one status per callback",
            labels,
            series,
            stacked=True,
            fmt=lambda v: f"{v:,.0f}",
        )
    )


def plots(scenarios: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The SVG files (name -> content) of the matrix: throughput, added latency, CPU and RSS."""
    ok = [s for s in scenarios if "error" not in s]
    labels = [label(s) for s in ok]

    def series(*path: str) -> list[float]:
        return [float(dig(s, *path) or 0.0) for s in ok]

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
    matrix = dig(results, "results", "matrix") or {}
    ran = results.get("ran", [])
    quick = " --quick" if matrix.get("quick") else ""
    names = "" if set(ran) >= {"matrix", *COMPONENTS} else " " + " ".join(ran)
    return f".venv/bin/python -m benchmarks.run{names}{quick} && .venv/bin/python -m benchmarks.write_docs"


def render(results: Results, plots_rel: str = "benchmarks") -> str:
    """The markdown page (plots linked under ``plots_rel``, relative to the page)."""
    matrix: Mapping[str, Any] = dig(results, "results", "matrix") or {}
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
        + (f", the matrix took {figure(matrix.get('duration_s'))} s" if matrix else ""),
        f"- Command: `{_command(results)}`",
        f"- Machine: {machine.get('cpus', '—')} CPUs ({machine.get('cpu_model', 'model not recorded')}), "
        f"{figure(machine.get('ram_gb'))} GB RAM, {machine.get('platform', '—')}",
        f"- Code: {code_line(matrix.get('code'))}",
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
    if half_load := dig(results, "results", "half_load"):
        out += half_load_section(half_load)
    if pipeline := dig(results, "results", "pipeline"):
        out += pipeline_section(pipeline, plots_rel)
    if transport := dig(results, "results", "transport"):
        out += transport_section(transport)
    if kafka_clients := dig(results, "results", "kafka_clients"):
        out += kafka_clients_section(kafka_clients)
    out += components(results)
    out += ["## Reading", "", *(f"- {line}" for line in reading(results) + worker_reading(results)), ""]
    return "\n".join(out)


def _loads(values: Any) -> str:
    return ", ".join(f"{v:g}" for v in values) if values else "—"


def _per_scenario(
    ok: Sequence[Mapping[str, Any]], header: Sequence[str], cells: Callable[[Mapping[str, Any]], list[str]]
) -> list[str]:
    """A table of one row per scenario: its rooms and ack rate, then ``cells`` of it under ``header``."""
    return table(["rooms", "ack rate", *header], [[figure(s["rooms"]), f"{s['ack_rate']:g}", *cells(s)] for s in ok])


def _per_mode(
    ok: Sequence[Mapping[str, Any]], header: Sequence[str], cells: Callable[[Mapping[str, Any], str], list[str]]
) -> list[str]:
    """A table of one row per scenario and mode (ack, then partition): the scenario's rooms and ack rate, the mode,
    then ``cells`` of the scenario in that mode under ``header``."""
    return table(
        ["rooms", "ack rate", "mode", *header],
        [
            [figure(s["rooms"]), f"{s['ack_rate']:g}", mode, *cells(s, mode)]
            for s in ok
            for mode in ("ack", "partition")
        ],
    )


def _spread(s: Mapping[str, Any], mode: str, latency: str) -> str:
    """A latency of a scenario in a mode as ``p50 / p99``."""
    return f"{figure(dig(s, mode, 'latency', latency, 'p50'))} / {figure(dig(s, mode, 'latency', latency, 'p99'))}"


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
        *([f"- Command (a chosen part of the matrix): `{matrix['command']}`"] if matrix.get("command") else []),
        f"- Rooms: {', '.join(figure(n) for n in sorted({s['rooms'] for s in scenarios})) or '—'}; ack rates {rates}; "
        f"{figure(setup.get('payload_bytes'))}-byte messages; {setup.get('partitions')} partitions on every topic; "
        f"{setup.get('workers', 1)} worker.",
        f"- Platform latency: lognormal, median {lat.get('median')} ms, p99 {lat.get('p99')} ms, capped at "
        f"{lat.get('max')} ms (the simulator's draw from acceptance to the device). A lost ack is the simulator "
        f"dropping every callback of a message; the worker then waits its ack timeout, "
        f"{figure(setup.get('ack_timeout_ms'))} ms, and moves on.",
        f"- Each scenario: a backlog of at least {figure(setup.get('backlog_min'))} messages (2 per room at least)"
        + (
            f", and at least {figure(setup['backlog_margin'], 2)} times what the raw loop's rate would send from the "
            "first send to the window's end (so that no room runs out of messages in the window)"
            if setup.get("backlog_margin")
            else ""
        )
        + ", rooms interleaved, produced once to one topic per mode; for each mode a fresh simulator, webhook and "
        "worker. "
        f"After the first send reaches the simulator and a warm-up ({figure(setup.get('warmup_s'))} s plus "
        f"{figure(setup.get('warmup_s_per_room', 0) * 1000, 2)} s per 1,000 rooms), the sends the "
        f"simulator accepted in a {figure(setup.get('window_s'))} s window are counted from its receipt log; then "
        "everything stops without waiting for the backlog to drain ('partition' mode would take hours).",
        "- The worker holds every room at once: its high watermark (buffered messages that pause a partition) is "
        f"max(5000, 2 x rooms per partition), with {setup.get('partitions')} partitions.",
        f"- Raw HTTP loop: `benchmarks/bare_post.py`, {figure(setup.get('raw_requests'))} POSTs of the same 1 KB body "
        f"to the same simulator (which calls the same webhook back), concurrency = rooms capped at "
        f"{setup.get('raw_concurrency_cap')} (the worker's HTTP pool), no Kafka and no ordering on the send side; "
        "rate = sends the simulator accepted / the client's wall time.",
        "",
    ]
    if len(ok) < len(scenarios):
        out += ["**Failed scenarios:** " + "; ".join(f"{s['name']}: {s['error']}" for s in scenarios if "error" in s)]
        out += [""]
    out += ["### Throughput", ""]
    out += _per_scenario(
        ok,
        ["ack msg/s", "partition msg/s", "raw msg/s", "ack / partition", "ack / raw", "partition / raw"],
        lambda s: [
            figure(s["ack"]["msgs_per_s"]),
            figure(s["partition"]["msgs_per_s"]),
            figure(s["raw"]["msgs_per_s"]),
            figure(s["ack_over_partition"], 2),
            figure(s["ack_over_raw"], 3),
            figure(s["partition_over_raw"], 3),
        ],
    )
    drained = [
        f"{figure(s['rooms'])} rooms, ack rate {s['ack_rate']:g}" for s in ok if not s["ack"]["backlog_left_at_end"]
    ]
    if drained:
        out += [
            "**The backlog ran out within the window** in ack mode for: " + "; ".join(drained) + ". Those rates count "
            "only what there was to send, so they are lower bounds.",
            "",
        ]
    out += [f"![Throughput per scenario]({rel}/throughput.svg)", "", "### Added latency", ""]
    out += [
        "Milliseconds, p50 / p99 over the messages sent in the window. *consumed→sent*: sent_at_ms - consumed_at_ms "
        "of each message's send (its terminal event, or a `dispatched` event where the worker wrote one); "
        "with a standing backlog it is mostly the wait behind the room's "
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
    spreads = (
        "consumed_to_sent_ms",
        "turn_to_sent_ms",
        "ack_at_webhook_minus_injected_ms",
        "ack_at_worker_minus_injected_ms",
    )
    out += _per_mode(
        ok,
        ["consumed→sent", "turn→sent", "ack-injected at webhook", "ack-injected at worker", "ack timeouts"],
        lambda s, mode: [_spread(s, mode, k) for k in spreads] + [figure(s[mode]["latency"]["ack_timeouts"])],
    )
    out += [
        "The ack path at the worker, in its three parts (p50 / p99, ms): *send→accepted*: accepted_at_ms of the "
        "receipt - sent_at_ms (the worker's wait for one of its pooled HTTP connections, then the request); "
        "*delivered→webhook*: acked_at_ms - delivered_at_ms (the simulator's callback sender and the webhook); "
        "*webhook→worker*: the `acked` event's ts_ms - acked_at_ms (Kafka and the worker's ack reader).",
        "",
    ]
    parts = ("send_to_accepted_ms", "delivered_to_webhook_ms", "webhook_to_worker_ms")
    out += _per_mode(
        ok,
        ["send→accepted", "delivered→webhook", "webhook→worker"],
        lambda s, mode: [_spread(s, mode, k) for k in parts],
    )
    out += [f"![Added latency in ack mode]({rel}/latency.svg)", "", "### Worker cost", ""]
    out += [
        "CPU time of the worker process over the window (from /proc) per message the simulator accepted in the "
        "window; the raw loop's is its own CPU per request (getrusage). RSS at the end of the window (peak in "
        "brackets); active rooms: the worker's `inturn_worker_active_rooms` gauge, highest value read.",
        "",
    ]
    out += _per_scenario(
        ok,
        [
            "ack CPU µs/msg",
            "partition CPU µs/msg",
            "raw CPU µs/request",
            "ack CPU / raw CPU",
            "ack RSS MiB",
            "partition RSS MiB",
            "active rooms (ack)",
        ],
        lambda s: [
            figure(s["ack"]["worker_cpu_us_per_message"]),
            figure(s["partition"]["worker_cpu_us_per_message"]),
            figure(s["raw"]["cpu_us_per_request"]),
            figure(s["ack_cpu_over_raw_cpu"], 2),
            f"{figure(s['ack']['worker_rss_mb'])} ({figure(s['ack']['worker_peak_rss_mb'])})",
            f"{figure(s['partition']['worker_rss_mb'])} ({figure(s['partition']['worker_peak_rss_mb'])})",
            figure(s["ack"]["peak_active_rooms"]),
        ],
    )
    out += [f"![CPU per message]({rel}/cpu.svg)", "", f"![Worker RSS]({rel}/rss.svg)", "", "### Receipt checker", ""]
    out += [
        "`inturn_devtools.receipts.check` over each mode's whole receipt log against the produced room order. "
        "The run stops before the backlog drains, so *lost* counts only messages missing before a later message of "
        "the same room that arrived; *not yet sent* is the backlog left when the window ended. *Reordered* counts "
        "adjacent inversions at the device; in brackets, how many of them came after the earlier message spent "
        "longer than the ack timeout between the platform's acceptance and the device (the simulator's receipt): "
        "the inversions ack mode allows.",
        "",
    ]

    def reordered(receipts: Mapping[str, Any]) -> str:
        past = receipts.get("reordered_past_timeout")
        return figure(receipts["reordered"]) + (
            f" ({figure(past)})" if receipts["reordered"] and past is not None else ""
        )

    out += _per_mode(
        ok,
        ["received", "lost", "reordered", "duplicated", "not yet sent"],
        lambda s, mode: (
            [figure(s[mode]["receipts"][k]) for k in ("received", "lost")]
            + [reordered(s[mode]["receipts"])]
            + [figure(s[mode]["receipts"][k]) for k in ("duplicated", "not_yet_sent")]
        ),
    )
    return out


def write(results: Results, doc: Path, plots_dir: Path) -> list[Path]:
    """Write the page, its plots and the results copy; the paths written."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    written = []
    scenarios = dig(results, "results", "matrix", "scenarios") or []
    for name, svg in plots(scenarios).items():
        (plots_dir / name).write_text(svg)
        written.append(plots_dir / name)
    if pipeline := dig(results, "results", "pipeline"):
        (plots_dir / "pipeline.svg").write_text(pipeline_plot(pipeline))
        written.append(plots_dir / "pipeline.svg")
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
    for path in write(load(args.bench_dir, args.plots / "results.json"), args.doc, args.plots):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
