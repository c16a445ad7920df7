"""Small process and port utilities shared by the local launchers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    proc: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:
    """Poll ``check`` until true; raise with the log's tail if ``proc`` dies or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} while starting{tail(log)}")
        if check():
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} not ready after {timeout:.0f}s{tail(log)}")


def tail(log: Path | None, lines: int = 20) -> str:
    """The last lines of ``log``, formatted for an error message ('' when there is none)."""
    if log is None or not log.exists():
        return ""
    text = log.read_text(errors="replace").splitlines()[-lines:]
    return f"; last lines of {log}:\n" + "\n".join(text)


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def stop_group(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """SIGTERM the process group of ``proc`` (started with a new session), SIGKILL after ``timeout``."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
