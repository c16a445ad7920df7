"""inturn's own services as separate OS processes (``inturn <service>``), for fault tests, benchmarks
and the demo: started with an environment, awaited on their health endpoint, and stopped, killed,
frozen or thawed like an orchestrator or a crash would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from inturn_devtools.waiting import wait_until

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: glibc's allocator as the container image sets it (Dockerfile): two malloc arenas, and blocks of 128 KiB and more
#: mapped on their own (given back when freed) rather than left as holes in the heap.
MALLOC_ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "131072"}


class ServiceProcess:
    """One ``inturn <command>`` process with its own log file."""

    def __init__(
        self, name: str, command: list[str], env: dict[str, str], log_dir: Path, health_url: str | None = None
    ) -> None:
        self.name = name
        self.command = command
        self.env = env
        self.log_file = log_dir / f"{name}.log"
        self.health_url = health_url
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The process id (the service must have been started)."""
        if self._proc is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._proc.pid

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, wait_s: float = 60.0) -> ServiceProcess:
        """Start it and wait until its health URL answers 200 (when it has one)."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "inturn_cli.main", *self.command],
                env={**MALLOC_ENV, **os.environ, **self.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if self.health_url:
            self.wait_healthy(wait_s)
        return self

    def wait_healthy(self, wait_s: float) -> None:
        """Poll the health URL until it answers 200; raise with the log's tail otherwise."""

        def healthy() -> bool:
            with urllib.request.urlopen(self.health_url or "", timeout=1) as resp:  # noqa: S310 - loopback
                return bool(resp.status == 200)

        what = f"{self.name} healthy at {self.health_url}"
        wait_until(healthy, wait_s, what, every=0.1, ignore=(OSError,), proc=self._proc, log=self.log_file)

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the process."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, sig)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``); returns the exit code."""
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        return self._proc.returncode

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)

    def freeze(self) -> None:
        """SIGSTOP: the process stops dead (no heartbeats, no sends) until ``thaw``."""
        self.signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT."""
        self.signal(signal.SIGCONT)

    def cpu_seconds(self) -> float:
        """User + system CPU time used so far (from /proc)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    def rss_mb(self) -> tuple[float, float]:
        """(current, peak) resident memory in MiB (from /proc)."""
        values = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
        return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)
