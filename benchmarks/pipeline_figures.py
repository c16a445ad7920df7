"""The pipeline benchmark's section of docs/benchmarks.md and its stacked bar plot (``bench_pipeline``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from benchmarks.docs_figures import dig, figure, source, table

#: The components whose CPU per delivered message is stacked, bottom to top: those measured in every variant's run,
#: then the bridge, measured in a stage of its own (``bench_pipeline.bridge_stage``) and the same under every bar.
MEASURED = ("broker", "worker", "webhook")
STACKED = (*MEASURED, "bridge")
TOPICS = ("messages", "acks", "statuses", "events")
BOUNDS = ("latency_within_10ms", "worker_webhook_not_above")


def bridge_us(p: Mapping[str, Any]) -> float | None:
    """The bridge's CPU µs per message it wrote, from its stage (None when it did not run or failed)."""
    value = dig(p, "bridge", "cpu_us_per_message", "bridge")
    return None if value is None else float(value)


def _all_rounds(p: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(label, the round's runs) of the run at the stated rate, then of the run at the sustainable rate."""
    stated = p.get("rounds") or []
    at_sustainable = dig(p, "sustainable", "rounds") or []
    many = len(stated) > 1 or len(at_sustainable) > 1
    out = [(f"#{i + 1}" if many else "", runs) for i, runs in enumerate(stated)]
    rate = dig(p, "sustainable", "rate")
    out += [(f"@{figure(rate)}" + (f" #{i + 1}" if many else ""), runs) for i, runs in enumerate(at_sustainable)]
    return out


def plot_series(p: Mapping[str, Any]) -> tuple[list[str], dict[str, list[float]]]:
    """Categories (each variant of every round, at the stated rate then at the sustainable one) and, per component,
    its CPU µs per delivered message (the bridge's from its own stage)."""
    labels: list[str] = []
    series: dict[str, list[float]] = {c: [] for c in STACKED}
    bridge = bridge_us(p) or 0.0
    for tag, runs in _all_rounds(p):
        for name, run in runs.items():
            if "error" in run:
                continue
            labels.append(f"{name} {tag}".strip())
            for c in MEASURED:
                series[c].append(float(dig(run, "cpu_us_per_message", c) or 0.0))
            series["bridge"].append(bridge)
    return labels, series


def _p(spread: Mapping[str, Any] | None) -> str:
    spread = spread or {}
    return f"{figure(spread.get('p50'))} / {figure(spread.get('p99'))}"


def pipeline_section(p: Mapping[str, Any], plots_rel: str) -> list[str]:
    """The ``## The whole pipeline, as the platforms call it`` section."""
    setup: Mapping[str, Any] = p.get("setup", {})
    out = [
        "## The whole pipeline, as the platforms call it",
        "",
        f"Measured in {source(p)} (`benchmarks/bench_pipeline.py`, alone: `make bench BENCH_ARGS=pipeline`"
        + (f"; this run: `{p['command']}`" if p.get("command") else "")
        + "), started "
        f"{p.get('started_utc', '—')} UTC, Kafka {p.get('kafka', '—')}, {figure(p.get('cpus'))} CPUs. One broker "
        "(JMX on loopback), the simulator, the webhook and one worker in ack mode on fresh topics per variant; the "
        f"simulator calls back **one status per request** (sent, delivered, read; "
        f"{figure(100 * float(setup.get('lost_share') or 0))}% of the messages lose every callback, each costing its "
        f"room the {figure(setup.get('ack_timeout_ms'))} ms ack timeout). A producer with the bridge's producer "
        f"settings offers {figure(setup.get('rate_msgs_per_s'))} msg/s over {figure(setup.get('rooms'))} rooms in turn "
        f"({figure(setup.get('accounts'))} sending accounts), then, in a second run, the box's sustainable rate "
        "(below); after a "
        f"{figure(setup.get('warmup_s'))} s warm-up, a {figure(setup.get('window_s'))} s window. CPU per delivered "
        "message is each process's CPU (/proc, all threads) over the window divided by the sends the simulator "
        "accepted in it; the idle cost (every process up, no traffic, "
        f"{figure(setup.get('idle_s'))} s) is stated beside it and *not* subtracted. Records and requests per "
        "delivered message are the broker's own counters (BrokerTopicMetrics per topic, RequestMetrics by type) "
        "over the window. Latencies are from the worker's events: *turn→sent* as in the half-load section, *ack* "
        "the ack's way back to the worker less the latency the simulator injected. The bridge is measured in a "
        "stage of its own, not in front of every variant (the Pub/Sub emulator would take most of a core of this box "
        "and starve the others): there a pull-mode bridge process writes the same messages, published to the "
        "emulator at the stated rate, to Kafka, and its CPU per message written is stacked on every bar. The "
        "broker's figure includes its JVM's just-in-time compiler threads, also shown apart (*of the broker's: JIT*) "
        "with the broker's ratio without them: a broker compiles its paths over its first minutes of traffic, which "
        "one that has served for hours no longer pays"
        + (
            f"; before the first variant the broker served {figure(setup.get('broker_warmup_s'))} s of the "
            "baseline's traffic, not counted."
            if setup.get("broker_warmup_s")
            else "."
        ),
        "",
    ]
    out += bridge_lines(p)
    out += sustainable_lines(p)
    variants: Mapping[str, Any] = p.get("variants", {})
    out += table(
        ["variant", "partitions", "settings (beside today's defaults)"],
        [
            [
                name,
                figure(v.get("partitions")),
                ", ".join(f"`{k}={val}`" for part in ("common", "worker", "webhook") for k, val in v[part].items())
                or "the defaults",
            ]
            for name, v in variants.items()
        ],
    )
    out += [f"![CPU per delivered message, stacked]({plots_rel}/pipeline.svg)", ""]
    rows = []
    for tag, runs in _all_rounds(p):
        for name, run in runs.items():
            label = f"{name} {tag or '#1'}"
            if "error" in run:
                rows.append([label, "failed: " + str(run["error"])[:80], *[""] * 9])
                continue
            cpu, idle = run.get("cpu_us_per_message", {}), run.get("idle_cores", {})
            loads = run.get("load_average", {})
            rows.append(
                [
                    label,
                    figure(run.get("delivered_msgs_per_s")),
                    *(figure(cpu.get(c)) for c in MEASURED),
                    figure(cpu.get("broker_jit")),
                    " / ".join(figure(idle.get(c), 3) for c in MEASURED),
                    _p(dig(run, "latency_ms", "turn_to_sent")),
                    _p(dig(run, "latency_ms", "ack")),
                    figure(dig(run, "receipts", "lost")),
                    f"{figure((loads.get('start') or [None])[0])} → {figure((loads.get('end') or [None])[0])}",
                ]
            )
    out += table(
        [
            "variant #round",
            "delivered msg/s",
            "broker µs/msg",
            "worker µs/msg",
            "webhook µs/msg",
            "of the broker's: JIT µs/msg",
            "idle cores (broker / worker / webhook)",
            "turn→sent p50 / p99 ms",
            "ack p50 / p99 ms",
            "lost",
            "load (1 min)",
        ],
        rows,
    )
    out += [
        "Per delivered message, from the broker's counters. A topic's *partition reads* are its "
        "`BrokerTopicMetrics` `TotalFetchRequestsPerSec`, which the broker marks once for every partition a fetch "
        "reads (`ReplicaManager.fetchMessages`), so a fetch of 12 partitions counts 12 there; *Fetch requests* "
        "(`RequestMetrics`) counts the requests.",
        "",
    ]
    rows = []
    for tag, runs in _all_rounds(p):
        for name, run in runs.items():
            if "error" in run:
                continue
            cells = [f"{name} {tag or '#1'}"]
            for t in TOPICS:
                tp = dig(run, "broker", "topics", t) or {}
                cells.append(
                    f"{figure(tp.get('records'), 2)} / {figure(tp.get('produce_requests'), 2)} / "
                    f"{figure(tp.get('fetch_requests'), 2)}"
                )
            req = dig(run, "broker", "requests") or {}
            cells += [
                figure(req.get("Produce"), 2),
                figure(req.get("Fetch"), 2),
                figure(dig(run, "broker", "requests_total"), 2),
            ]
            rows.append(cells)
    out += table(
        [
            "variant #round",
            *(f"{t}: records / produce req / partition reads" for t in TOPICS),
            "Produce requests",
            "Fetch requests",
            "all requests",
        ],
        rows,
    )
    rows = []
    for tag, runs in _all_rounds(p):
        for name, run in runs.items():
            vs = run.get("vs_baseline")
            if not vs:
                continue
            ratio, delta = vs.get("cpu_ratio", {}), vs.get("p99_delta", {})
            rows.append(
                [
                    f"{name} {tag or '#1'}",
                    *(figure(ratio.get(c), 3) for c in MEASURED),
                    figure(ratio.get("broker_less_jit"), 3),
                    figure(ratio.get("sim"), 3),
                    figure(delta.get("turn_to_sent_p99_ms")),
                    figure(delta.get("ack_p99_ms")),
                    "yes" if all(vs.get(k) for k in ("broker_at_most_half", *BOUNDS)) else "no",
                ]
            )
    if rows:
        out += [
            "Against the baseline of the same round. The simulator runs the same code on the same traffic in every "
            "variant, so its ratio is a control: how far the box alone moved an HTTP process's CPU per message (a "
            "busier box batches more work per wake-up of an event loop).",
            "",
        ]
        out += table(
            [
                "variant #round",
                "broker CPU ratio",
                "worker CPU ratio",
                "webhook CPU ratio",
                "broker less JIT ratio",
                "simulator CPU ratio (control)",
                "turn→sent p99 Δ ms",
                "ack p99 Δ ms",
                "broker ≤ 0.5, Δ p99 ≤ 10 ms, worker and webhook ≤ 1",
            ],
            rows,
        )
    out += pipeline_reading(p)
    sized, which = sizing_source(p)
    if sized is not None:
        out += [
            f"Sizing reckoned from the {which} figures at {figure(sized.get('rate_msgs_per_s'))} msg/s (each process "
            f"at {figure(SIZING_UTILIZATION)} of a core, partitions twice the workers, events and statuses "
            f"partitions as few as keep a new owner's ends read within {figure(SIZING_ENDS_READ_RECORDS)} records; "
            "docs/operations.md):",
            "",
        ]
        keys = ("broker_cores", "workers", "webhooks", "partitions", "events_partitions")
        out += table(
            [
                "delivered msg/s",
                "broker cores",
                "worker replicas",
                "webhook replicas",
                "partitions (messages = acks)",
                "events and statuses partitions",
            ],
            [[figure(row["rate"]), *(figure(row[k]) for k in keys)] for row in sizing(sized)],
        )
    return out


def bridge_lines(p: Mapping[str, Any]) -> list[str]:
    """The bridge's stage in a sentence (or why it has no figure)."""
    stage = p.get("bridge")
    if not stage:
        return ["The bridge's stage did not run.", ""]
    if "error" in stage:
        return [f"The bridge's stage failed: {str(stage['error'])[:120]}.", ""]
    cpu, less, idle = (
        stage.get("cpu_us_per_message", {}),
        stage.get("cpu_us_per_message_less_idle", {}),
        stage.get("idle_cores", {}),
    )
    return [
        f"Bridge stage: {figure(stage.get('written_msgs_per_s'))} msg/s written to Kafka over "
        f"{figure(stage.get('window_s'))} s (offered {figure(stage.get('rate_msgs_per_s'))} msg/s); the bridge "
        f"**{figure(cpu.get('bridge'))} µs** of CPU per message ({figure(less.get('bridge'))} less its idle "
        f"{figure(idle.get('bridge'), 3)} cores), the emulator {figure(cpu.get('emulator'))} µs per message (not "
        "counted: real Pub/Sub is Google's cost).",
        "",
    ]


def sustainable_lines(p: Mapping[str, Any]) -> list[str]:
    """The sustainable-rate search: each rate tried and whether its backlog held."""
    search = p.get("sustainable")
    if not search:
        return ["The sustainable rate was not searched in this run.", ""]
    tried = ", ".join(
        f"{figure(t.get('rate'))} msg/s "
        + ("held" if t.get("sustained") else "grew" if t.get("backlog") else "failed")
        + (f" ({figure(100 * float(t['backlog']['growth_share']), 1)}%)" if t.get("backlog") else "")
        for t in search.get("tried") or []
    )
    rate = search.get("rate")
    head = (
        f"The box's sustainable rate: **{figure(rate)} msg/s**, the highest rate tried whose backlog (messages offered "
        f"less the committed offsets) grew by at most {figure(100 * float(search.get('backlog_growth_max') or 0))}% "
        f"of the messages offered over a {figure(search.get('window_s'))} s window, with the baseline"
        if rate is not None
        else "No rate tried held its backlog"
    )
    return [f"{head}: {tried}. Rows marked @{figure(rate)} are the second run, at that rate.", ""]


def pipeline_reading(p: Mapping[str, Any]) -> list[str]:
    """Plain statements from the figures: each candidate's verdict, and whether the box let the latencies count."""
    out: list[str] = []
    for tag, runs in _all_rounds(p):
        where = f"Round {tag or '#1'}"
        base = runs.get("baseline", {})
        loads = [v for r in runs.values() for v in (dig(r, "load_average", "start") or [None])[:1] if v is not None]
        ack_p50 = dig(base, "latency_ms", "ack", "p50")
        if ack_p50 is not None and ack_p50 > 1000:
            out.append(
                f"- {where}: the baseline's acks reached the worker {figure(ack_p50)} ms (p50) after the latency "
                f"the simulator injected, at a load average of {figure(min(loads))} to {figure(max(loads))} on "
                f"{figure(p.get('cpus'))} CPUs: the ack path waited for CPU, not for Kafka's settings, and most "
                "messages timed out; this round cannot judge the latency bounds."
            )
        for name, run in runs.items():
            vs = run.get("vs_baseline")
            if not vs:
                continue
            met = all(vs.get(k) for k in ("broker_at_most_half", *BOUNDS))
            ratio = {c: figure(dig(vs, "cpu_ratio", c), 3) for c in MEASURED}
            verdict = "met" if met else "not met"
            out.append(
                f"- {where}, {name}: broker CPU per delivered message {ratio['broker']} of the baseline's, "
                f"worker {ratio['worker']}, webhook {ratio['webhook']}: the issue's bounds are {verdict}."
            )
    return [*out, ""] if out else []


#: The share of a core each process is sized to use: half, so that the half-load latencies hold (a worker at full
#: core saturates, docs_figures.CPU_BOUND) and a replica lost leaves room for its load.
SIZING_UTILIZATION = 0.5
SIZING_RATES = (1_000, 10_000, 50_000)
#: Event records a new owner's ends read may meet in its events partition over the acks look-back
#: (``SIZING_LOOK_BACK_S``): about 2 s of reading (38,413 records took 1.5 s in the fault matrix's kill -9 row).
SIZING_ENDS_READ_RECORDS = 50_000
SIZING_LOOK_BACK_S = 60


def sizing_source(p: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str]:
    """The run the sizing is reckoned from, and how to name it: the first round's ``sized`` variant (today's
    defaults on topics sized for the rate) where it ran, else the baseline's."""
    for name, label in (("sized", "`sized` variant's (today's defaults on sized topics)"), ("baseline", "baseline's")):
        for r in p.get("rounds") or []:
            run = r.get(name)
            if run is not None and "error" not in run:
                return run, label
    return None, ""


def sizing(run: Mapping[str, Any], rates: tuple[int, ...] = SIZING_RATES) -> list[dict[str, Any]]:
    """Broker cores, worker and webhook replicas and partitions for each delivered-message rate, reckoned from one
    variant's CPU per delivered message: each process at ``SIZING_UTILIZATION`` of a core; the idle cost is inside
    the per-message figure at the measured rate, so it is counted (generously) at every rate. Partitions: twice
    the workers (room to scale out without adding partitions); of the events and statuses topics, as
    few as keep a new owner's ends read within ``SIZING_ENDS_READ_RECORDS``, at least 1, at most the messages'."""
    cpu = run.get("cpu_us_per_message", {})
    rows = []
    for rate in rates:
        cores = {c: rate * float(cpu.get(c) or 0.0) / 1e6 for c in MEASURED}
        workers = max(1, math.ceil(cores["worker"] / SIZING_UTILIZATION))
        partitions = 2 * workers
        events = min(partitions, max(1, math.ceil(rate * SIZING_LOOK_BACK_S / SIZING_ENDS_READ_RECORDS)))
        rows.append(
            {
                "rate": rate,
                "broker_cores": math.ceil(cores["broker"] / SIZING_UTILIZATION),
                "workers": workers,
                "webhooks": max(1, math.ceil(cores["webhook"] / SIZING_UTILIZATION)),
                "partitions": partitions,
                "events_partitions": events,
            }
        )
    return rows
