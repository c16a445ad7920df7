"""The adapters' HTTP client, chosen by measurement: client CPU per request of each candidate against the same
platform simulator, in the same run, at the worker's concurrency.

Every candidate is ``benchmarks.bare_post`` with its ``--client``: its own process, a pool of 200 connections
(the worker's default ``INTURN_WORKER_POOL_SIZE``) and 2,000 concurrent senders, so 1,800 sends wait for a
pooled connection at any moment, as the rooms of a loaded worker do. The CPU is the client process's own
(getrusage: every thread, user + system), so a client that works on threads of its own (pyreqwest's tokio
runtime) is charged for them. The simulator and the webhook are separate processes, the same for all.

The candidates run in rounds, in a rotated order each round, so that drift of the shared machine spreads over
all of them; each figure is over all rounds, and each round's ratio to aiohttp (today's client, the baseline)
shows the spread.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import code_version, fresh_topics
from benchmarks.bare_post import CLIENTS
from inturn_devtools import LocalKafka
from inturn_devtools.pipeline import ACCESS_TOKEN, PHONE_NUMBER_ID, Pipeline

BASELINE = "aiohttp"
POOL = 200
SENDERS = 2000
SIM_ENV = {
    "INTURN_SIM_LATENCY_MEDIAN_MS": "20",
    "INTURN_SIM_LATENCY_P99_MS": "60",
    "INTURN_SIM_LATENCY_MAX_MS": "200",
    "INTURN_SIM_DROP_RATE": "0",
    "INTURN_LOG_LEVEL": "WARNING",
}


def available(clients: tuple[str, ...] = CLIENTS) -> tuple[list[str], list[str]]:
    """The candidates whose package is installed, and those whose package is not."""
    package = {"aiohttp": "aiohttp", "inturn": "httptools", "pyreqwest": "pyreqwest", "aiosonic": "aiosonic"}
    have = [c for c in clients if importlib.util.find_spec(package[c]) is not None]
    return have, [c for c in clients if c not in have]


def post_with(url: str, client: str, requests: int, pool: int, senders: int, recipients: int) -> dict[str, Any]:
    """One ``benchmarks.bare_post`` process with ``client``: its figures."""
    command = [sys.executable, "-m", "benchmarks.bare_post", url, ACCESS_TOKEN, str(requests), str(pool)]
    command += [str(recipients), "1024", "--client", client, "--senders", str(senders)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def summary(runs: dict[str, list[dict[str, Any]]], baseline: str = BASELINE) -> dict[str, dict[str, Any]]:
    """Per client: CPU per request and requests/s over all its runs, each run's figure, and the ratio of its CPU
    per request to the baseline's, overall and per round (run i against the baseline's run i)."""
    out: dict[str, dict[str, Any]] = {}
    base = runs[baseline]
    base_us = sum(r["cpu_s"] for r in base) / sum(r["requests"] for r in base) * 1e6
    for client, rs in runs.items():
        requests = sum(r["requests"] for r in rs)
        cpu_us = sum(r["cpu_s"] for r in rs) / requests * 1e6
        out[client] = {
            "requests": requests,
            "failures": sum(r["failures"] for r in rs),
            "cpu_us_per_request": round(cpu_us, 1),
            "cpu_us_per_request_runs": [round(r["cpu_us_per_request"], 1) for r in rs],
            "requests_per_s": round(requests / sum(r["wall_s"] for r in rs), 1),
            "cpu_ratio_to_baseline": round(cpu_us / base_us, 3),
            "cpu_ratio_to_baseline_rounds": [
                round(r["cpu_us_per_request"] / b["cpu_us_per_request"], 3) for r, b in zip(rs, base, strict=True)
            ],
        }
    return out


def run(quick: bool) -> dict[str, Any]:
    """Every installed candidate, in rounds, against one simulator."""
    requests, rounds = (6000, 1) if quick else (20_000, 3)
    clients, missing = available()
    code = code_version()
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
    with LocalKafka(heap_mb=512) as kafka:
        settings = fresh_topics(kafka.bootstrap, "transport", 4)
        workdir = Path(tempfile.mkdtemp(prefix="inturn-bench-transport-"))
        with Pipeline(settings, "postgresql://unused@127.0.0.1:1/unused", workdir, sim=SIM_ENV) as line:
            line.start()
            url = f"{line.sim_url}/v21.0/{PHONE_NUMBER_ID}/messages"
            for i in range(rounds):
                for client in clients[i % len(clients) :] + clients[: i % len(clients)]:
                    runs[client].append(post_with(url, client, requests, POOL, SENDERS, SENDERS))
    figures = summary(runs)
    cheapest = min(figures, key=lambda c: figures[c]["cpu_us_per_request"])
    return {
        "setup": {"pool": POOL, "senders": SENDERS, "requests_per_run": requests, "rounds": rounds, "sim": SIM_ENV},
        "baseline": BASELINE,
        "clients": figures,
        "not_installed": missing,
        "cheapest": cheapest,
        "adopted": "inturn",
        "code": code,
    }
