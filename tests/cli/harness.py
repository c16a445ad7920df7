"""Running the real ``inturn`` command as a subprocess, and what every failure of it must look like."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: The bound the CLI promises for any failure to reach a service (docs/cli.md), process start included.
FAILURE_BOUND_S = 15.0

INTURN = str(Path(sys.executable).with_name("inturn"))


@dataclass(frozen=True)
class Run:
    """One finished ``inturn`` process."""

    args: tuple[str, ...]
    code: int
    out: str
    err: str
    seconds: float


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released: connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any INTURN_* or Pub/Sub emulator variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTURN_") and k != "PUBSUB_EMULATOR_HOST"}
    env.update(extra)
    return env


def run(*args: str, env: dict[str, str], stdin: int | None = subprocess.DEVNULL, timeout: float = 120) -> Run:
    """Run ``inturn *args`` to completion."""
    started = time.monotonic()
    proc = subprocess.run(
        [INTURN, *args], env=env, stdin=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
    return Run(tuple(args), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def assert_one_line_failure(result: Run, *needles: str) -> None:
    """Exit code 1, exactly one line on stderr containing every needle, nothing on stdout, no traceback and no
    librdkafka line, within ``FAILURE_BOUND_S``."""
    shown = f"inturn {' '.join(result.args)} -> {result.code} in {result.seconds:.1f}s\n{result.err}"
    assert result.code == 1, shown
    assert len(result.err.splitlines()) == 1, shown
    assert "Traceback" not in result.err, shown
    assert "rdkafka" not in result.err.lower(), shown
    assert "%3|" not in result.err, shown
    assert result.out == "", shown
    for needle in needles:
        assert needle in result.err, f"{needle!r} not in: {shown}"
    assert result.seconds < FAILURE_BOUND_S, shown
