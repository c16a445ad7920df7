"""``inturn sim`` as a process: serves, writes its receipt file, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from inturn_devtools.process import free_port
from inturn_devtools.receipts import check, load_receipts
from inturn_devtools.waiting import wait_until

from .support import message

PROC_TOKEN = "proc-token"


def _post(url: str, body: object) -> int:
    request = urllib.request.Request(  # noqa: S310 - a loopback URL of our own
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {PROC_TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - loopback
        return int(answer.status)


def test_inturn_sim_serves_writes_its_receipt_file_and_flushes_it_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    path = tmp_path / "receipts.jsonl"
    env = {
        **os.environ,
        "INTURN_SIM_ACCESS_TOKEN": PROC_TOKEN,
        "INTURN_SIM_LATENCY_MEDIAN_MS": "5",
        "INTURN_SIM_LATENCY_P99_MS": "5",
        "INTURN_SIM_RECEIPTS_FLUSH_S": "3600",  # only the shutdown flush can write the file in time
        "INTURN_LOG_FORMAT": "json",
    }
    cmd = [sys.executable, "-m", "inturn_cli.main", "sim", "--port", str(port), "--receipts-path", str(path)]
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: urllib.request.urlopen(f"{base}/readyz", timeout=1).status == 200,  # noqa: S310 - loopback
            20,
            "readyz",
            ignore=(urllib.error.URLError, ConnectionError),  # not listening yet
        )
        for n in range(3):
            assert _post(f"{base}/v21.0/100200300/messages", message("491701", "room-A", f"m{n}")) == 200
        wait_until(
            lambda: len(load_receipts(base)) == 3, 10, "three receipts", ignore=(urllib.error.URLError, ConnectionError)
        )
        served = load_receipts(base)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    _, stderr = process.communicate()
    events = [json.loads(line)["event"] for line in stderr.decode().splitlines() if line.startswith("{")]
    assert events[-2:] == ["sim_stopping", "sim_stopped"]
    assert load_receipts(path) == served
    assert check(served, {"room-A": ["m0", "m1", "m2"]}).ok()
