"""How the worker's own benchmarks read in docs/benchmarks.md: the transport candidates side by side (the baseline
named, and what each side's CPU includes), the half-load scenario's delay from turn to send, and ack mode's rate
against the raw loop at the room counts the targets name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks.docs_figures import dig, figure, source, table

LIBRARIES = {
    "aiohttp": "aiohttp's ClientSession behind a FIFO gate of the pool's size (the adapters' client before)",
    "inturn": "`inturn.platforms.transport`: asyncio protocol + httptools (llhttp), pool and line of its own",
    "pyreqwest": "pyreqwest: Rust reqwest/hyper on its own tokio threads",
    "aiosonic": "aiosonic's HTTPClient with its own pool",
}


def kafka_clients_section(k: Mapping[str, Any]) -> list[str]:
    """The ``## Kafka clients`` section: CPU per record produced and consumed, per client, against confluent-kafka."""
    clients: Mapping[str, Mapping[str, Any]] = k.get("clients", {})
    out = [
        "## Kafka clients",
        "",
        f"Measured in {source(k)} (`benchmarks/bench_kafka_clients.py`): each client in its own process produces "
        f"{figure(k.get('records'))} records of 300 bytes (idempotent, acks=all, linger 50 ms, as the worker's "
        "events) and consumes them back, on the same broker; "
        f"{figure(k.get('rounds'))} round(s), the order alternated. *CPU* is the client process's own (getrusage: "
        "every thread). The worker and its floor use confluent-kafka.",
        "",
    ]
    rows = [
        [
            name,
            figure(c.get("produce_us_per_record"), 2),
            figure(c.get("produce_vs_confluent"), 2),
            figure(c.get("consume_us_per_record"), 2),
            figure(c.get("consume_vs_confluent"), 2),
        ]
        for name, c in clients.items()
    ]
    out += table(
        ["client", "produce CPU µs/record", "vs confluent-kafka", "consume CPU µs/record", "vs confluent-kafka"], rows
    )
    return out


def transport_section(t: Mapping[str, Any]) -> list[str]:
    """The ``## The adapters' HTTP transport`` section: one row per candidate, the adopted one named."""
    setup: Mapping[str, Any] = t.get("setup", {})
    clients: Mapping[str, Mapping[str, Any]] = t.get("clients", {})
    baseline = t.get("baseline", "aiohttp")
    out = [
        "## The adapters' HTTP transport",
        "",
        f"Measured in {source(t)}: each candidate HTTP client in its own process (`benchmarks/bare_post.py "
        f"--client NAME`) POSTs the worker's 1 KB send body to the same platform simulator (its latency median "
        f"{dig(setup, 'sim', 'INTURN_SIM_LATENCY_MEDIAN_MS')} ms), with a pool of {figure(setup.get('pool'))} "
        f"connections and {figure(setup.get('senders'))} concurrent senders, so most sends wait for a pooled "
        f"connection as the rooms of a loaded worker do; {figure(setup.get('requests_per_run'))} requests a run, "
        f"{figure(setup.get('rounds'))} round(s), the candidates in a rotated order each round. *Client CPU* is the "
        "client process's own CPU time (getrusage: user + system of every thread, so pyreqwest's tokio threads "
        "count) per request, rendering the JSON body included (the same for all); the simulator and the webhook "
        f"are other processes. The baseline is {baseline} (today's client), measured in the same run.",
        "",
    ]
    rows = [
        [
            f"{name}{' (adopted)' if name == t.get('adopted') else ''}",
            LIBRARIES.get(name, name),
            figure(c.get("cpu_us_per_request")),
            figure(c.get("requests_per_s")),
            figure(c.get("cpu_ratio_to_baseline"), 2)
            + (
                f" (rounds {', '.join(figure(v, 2) for v in rounds)})"
                if isinstance(rounds := c.get("cpu_ratio_to_baseline_rounds"), list) and len(rounds) > 1
                else ""
            ),
            figure(c.get("failures")),
        ]
        for name, c in sorted(clients.items(), key=lambda kv: kv[1].get("cpu_us_per_request") or 0)
    ]
    out += table(
        ["client", "what", "client CPU µs/request", "requests/s", f"CPU / {baseline}", "non-200 answers"], rows
    )
    if missing := t.get("not_installed"):
        out += [f"Not measured (package not installed): {', '.join(missing)}.", ""]
    return out


def transport_reading(t: Mapping[str, Any]) -> list[str]:
    """The plain statement of the transport benchmark: the cheapest candidate and the adopted one."""
    clients: Mapping[str, Mapping[str, Any]] = t.get("clients", {})
    cheapest, adopted = str(t.get("cheapest")), str(t.get("adopted"))
    if cheapest not in clients or adopted not in clients:
        return []
    ratio = clients[adopted].get("cpu_ratio_to_baseline")
    verdict = "the cheapest measured" if cheapest == adopted else f"not the cheapest measured ({cheapest} was)"
    return [
        f"The adapters' transport ({adopted}) cost {figure(ratio, 2)}x {t.get('baseline')}'s client CPU per request "
        f"in the same run: {verdict}."
    ]


def half_load_section(h: Mapping[str, Any]) -> list[str]:
    """The ``## The worker at half load`` section."""
    turn, consumed = h.get("turn_to_sent_ms", {}), h.get("consumed_to_sent_ms", {})
    receipts: Mapping[str, Any] = h.get("receipts", {})
    out = [
        "## The worker at half load",
        "",
        f"Measured in {source(h)} (`benchmarks/bench_half_load.py`): {figure(h.get('rooms'))} rooms, every ack "
        "delivered, the matrix's platform latency. "
        + (
            "One worker in ack mode under a standing backlog sustained "
            f"{figure(dig(h, 'capacity', 'msgs_per_s'))} msg/s on this box (the raw HTTP loop's burst reached "
            f"{figure(dig(h, 'raw', 'msgs_per_s'))} msg/s); a producer then offered "
            f"{figure(h.get('rate_offered_msgs_per_s'))} msg/s ({figure(h.get('share_of_capacity'))} of the "
            "sustained rate)"
            if h.get("capacity")
            else f"The raw HTTP loop of the same box reached {figure(dig(h, 'raw', 'msgs_per_s'))} msg/s; a producer "
            f"then offered {figure(h.get('rate_offered_msgs_per_s'))} msg/s "
            f"({figure(h.get('share_of_raw_rate'))} of it)"
        )
        + " to one worker in ack mode, rooms in turn. Over the "
        f"{figure(h.get('window_s'))} s window after the warm-up, from the worker's own events: *turn→sent* is a "
        "message's sent_at_ms minus the moment its turn came (the later of its consumed_at_ms and the ts_ms of the "
        "terminal event of the room's previous message); *consumed→sent* includes the wait behind the room's "
        "earlier messages.",
        "",
    ]
    header = ["offered msg/s", "delivered msg/s", "turn→sent p50 / p99 ms", "consumed→sent p50 / p99 ms"]
    out += table(
        [*header, "worker CPU s/s", "lost", "reordered", "duplicated"],
        [
            [
                figure(h.get("rate_offered_msgs_per_s")),
                figure(h.get("delivered_msgs_per_s")),
                f"{figure(turn.get('p50'))} / {figure(turn.get('p99'))} (n = {figure(turn.get('n'))})",
                f"{figure(consumed.get('p50'))} / {figure(consumed.get('p99'))}",
                figure(h.get("worker_cpu_s_per_s"), 2),
                figure(receipts.get("lost")),
                figure(receipts.get("reordered")),
                figure(receipts.get("duplicated")),
            ]
        ],
    )
    return out


def worker_reading(results: Mapping[str, Any]) -> list[str]:
    """Plain statements for the worker's targets: the transport chosen, the half-load delay, and ack mode's rate
    against the raw loop at 5,000 and 25,000 rooms."""
    r: Mapping[str, Any] = results.get("results", {})
    lines = transport_reading(t) if (t := r.get("transport")) else []
    if (h := r.get("half_load")) and (p99 := dig(h, "turn_to_sent_ms", "p99")) is not None:
        target = h.get("target_turn_to_sent_p99_ms")
        verdict = "met" if target is not None and p99 <= target else "not met"
        basis = "the rate the pipeline sustains" if h.get("capacity") else "the raw loop's rate"
        lines.append(
            f"At half {basis} ({figure(h.get('rooms'))} rooms), the worker's turn→sent delay p99: "
            f"{figure(p99)} ms, target ≤ {target} ms: {verdict}."
        )
    scenarios = dig(r, "matrix", "scenarios") or []
    for rooms in (5000, 25_000):
        ratios = [
            s["ack_over_raw"]
            for s in scenarios
            if "error" not in s and s["rooms"] == rooms and s.get("ack_over_raw") is not None
        ]
        if ratios:
            verdict = "met" if min(ratios) >= 0.5 else "not met"
            shown = ", ".join(figure(v, 2) for v in ratios)
            lines.append(f"Ack mode against the raw loop at {rooms:,} rooms: {shown}, target ≥ 0.5: {verdict}.")
    return lines
