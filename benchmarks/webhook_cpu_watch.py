"""The webhook's CPU per delivered message inside another benchmark (``benchmarks.run worker`` by default).

``benchmarks.bench_worker`` starts a fresh webhook per scenario but reports only the worker's CPU. This runs
that benchmark as a child process and reads, every 0.2 s, the CPU time (/proc) of each webhook process it
starts; a process is told apart by its acks topic (``<scenario>.acks``, from ``benchmarks.fresh_topics``).
A webhook's CPU counts from the moment its scenario's worker process appears (the webhook is started and
healthy before it, so its start-up is left out) to its exit. At the end it prints one JSON line: per
scenario the webhook's CPU seconds, and for the worker scenarios (``cpu1``, ``cpu2``, ...) its CPU per
delivered message.

    .venv/bin/python -m benchmarks.webhook_cpu_watch [worker [--quick]]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

WORKER_SCENARIO_MESSAGES = {False: 2000 * 10, True: 500 * 10}  # bench_worker.run: rooms x per_room
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _sample(pid: int, command: bytes) -> tuple[str, float] | None:
    """(acks topic, CPU seconds) when ``pid`` is an ``inturn <command>`` process, else None."""
    try:
        if b"inturn_cli.main\x00" + command not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return None
        env = dict(
            item.split(b"=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\x00") if b"=" in item
        )
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None  # gone meanwhile
    topic = env.get(b"INTURN_TOPIC_ACKS", b"?").decode()
    return topic, (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def main(argv: list[str]) -> int:
    """Run the benchmark, watch its webhooks, print their CPU per scenario; the benchmark's exit code."""
    args = argv or ["worker"]
    bench = subprocess.Popen([sys.executable, "-m", "benchmarks.run", *args])
    latest: dict[int, tuple[str, float]] = {}
    at_worker_start: dict[int, float] = {}  # webhook pid -> its CPU when its scenario's worker appeared
    while bench.poll() is None:
        pids = _descendants(bench.pid)
        workers = {s[0] for pid in pids if (s := _sample(pid, b"worker")) is not None}
        for pid in pids:
            sample = _sample(pid, b"webhook")
            if sample is not None:
                latest[pid] = sample
                if sample[0] in workers:
                    at_worker_start.setdefault(pid, sample[1])
        time.sleep(0.2)
    per_scenario: dict[str, float] = {}
    for pid, (topic, cpu) in latest.items():
        scenario = topic.removesuffix(".acks")
        per_scenario[scenario] = per_scenario.get(scenario, 0.0) + cpu - at_worker_start.get(pid, 0.0)
    messages = WORKER_SCENARIO_MESSAGES["--quick" in args]
    per_message = {
        name: round(cpu / messages * 1e6, 1)
        for name, cpu in sorted(per_scenario.items())
        if name.startswith("cpu") and name[3:].isdigit()
    }
    print(
        json.dumps(
            {
                "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "webhook_cpu_s": {k: round(v, 2) for k, v in sorted(per_scenario.items())},
                "webhook_cpu_us_per_delivered_message": per_message,
                "messages_per_worker_scenario": messages,
            }
        ),
        flush=True,
    )
    return bench.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
