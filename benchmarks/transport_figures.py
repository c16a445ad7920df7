"""How the transport benchmark reads in docs/benchmarks.md: the candidates side by side, with the baseline named
and what each side's CPU includes."""

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
