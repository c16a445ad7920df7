"""Helpers of the security tests: real service processes on real Kafka, driven as a hostile client would, over
loopback only.

General (any service): ``ServiceProcess`` (a service in a process of its own, its log in a file), ``rss_bytes``,
``metric`` (a sample of a Prometheus text page), ``RawConnection`` (a blocking socket that sends exactly what the
test says and reports when the server closed), ``raise_open_files``. The webhook's: ``webhook_process``.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from inturn.settings import KafkaSettings
from inturn_devtools.process import free_port
from inturn_devtools.waiting import tail, wait_until

#: The Meta app secret the webhook under test accepts.
WEBHOOK_APP_SECRET = "security-test-app-secret"


def raise_open_files(wanted: int) -> int:
    """Raise this process's open-file limit (children inherit it) to ``wanted`` or the hard limit; the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def rss_bytes(pid: int) -> int:
    """The resident set size of process ``pid`` (``VmRSS`` of /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def metric(page: str, name: str, **labels: str) -> float:
    """The value of the sample ``name{labels}`` on a Prometheus text page (0 when absent: a counter not yet seen)."""
    wanted = {f'{key}="{value}"' for key, value in labels.items()}
    for line in page.splitlines():
        match = re.fullmatch(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)", line)
        if match is None or match.group(1) != name:
            continue
        present = set(re.findall(r'\w+="[^"]*"', match.group(2) or ""))
        if wanted <= present:
            return float(match.group(3))
    return 0.0


class ServiceProcess:
    """A service started as ``python -m inturn_cli.main <argv>`` with ``env``; its stdout and stderr in a file."""

    def __init__(self, argv: list[str], env: dict[str, str], workdir: Path) -> None:
        self.log = workdir / f"{argv[0]}.log"
        self._out = self.log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "inturn_cli.main", *argv],
            env={**os.environ, **env},
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, url: str, within: float = 60.0) -> None:
        """Until ``url`` answers 200 (the process exiting first fails, with its log's tail)."""
        wait_until(
            lambda: httpx.get(url, timeout=2).status_code == 200,
            within,
            f"{url} answering 200",
            every=0.1,
            ignore=(httpx.TransportError,),
            proc=self.proc,
            log=self.log,
        )

    def tail(self, lines: int = 30) -> str:
        return tail(self.log, lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()


class RawConnection:
    """A blocking TCP connection to a loopback port that sends exactly the bytes given."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.opened = time.monotonic()

    def send(self, data: bytes) -> bool:
        """Send ``data``; False when the server closed the connection meanwhile (reset or broken pipe)."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def read_until_closed(self, within: float) -> tuple[bytes, float | None]:
        """What the server sent until it closed the connection, and when it closed (seconds since the connection
        opened; None when it stayed silent and open for ``within`` seconds)."""
        received = b""
        self.sock.settimeout(within)  # each read waits at most this long: a silent, open connection ends it
        try:
            while chunk := self.sock.recv(65536):
                received += chunk
        except TimeoutError:
            return received, None
        except ConnectionResetError:
            pass
        return received, time.monotonic() - self.opened

    def read_response(self, within: float = 10.0) -> bytes:
        """One whole response (status line, headers and a body of its Content-Length), leaving the connection open;
        each read waits at most ``within`` seconds."""
        received = b""
        self.sock.settimeout(within)
        while not _whole(received):
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            received += chunk
        return received

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def _whole(response: bytes) -> bool:
    head, sep, body = response.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head) if sep else None
    return length is not None and len(body) >= int(length.group(1))


def status_of(response: bytes) -> int:
    """The status code of a raw HTTP response (0 for none)."""
    match = re.match(rb"HTTP/1\.[01] (\d{3})", response)
    return int(match.group(1)) if match else 0


@pytest.fixture
def webhook_process(
    inturn_topics: KafkaSettings, tmp_path: Path
) -> Iterator[Callable[..., tuple[ServiceProcess, int, int]]]:
    """Start ``inturn webhook`` on this test's topics (``env`` overrides); (process, public port, internal port),
    ready. Every process started is stopped at the end."""
    started: list[ServiceProcess] = []

    def start(**env: str) -> tuple[ServiceProcess, int, int]:
        port, internal = free_port(), free_port()
        values = {
            "INTURN_KAFKA_BOOTSTRAP": inturn_topics.kafka_bootstrap,
            "INTURN_TOPIC_MESSAGES": inturn_topics.topic_messages,
            "INTURN_TOPIC_ACKS": inturn_topics.topic_acks,
            "INTURN_TOPIC_EVENTS": inturn_topics.topic_events,
            "INTURN_TOPIC_DLQ": inturn_topics.topic_dlq,
            "INTURN_TOPIC_STATUSES": inturn_topics.topic_statuses,
            "INTURN_WEBHOOK_APP_SECRETS": WEBHOOK_APP_SECRET,
            "INTURN_WEBHOOK_HOST": "127.0.0.1",
            "INTURN_WEBHOOK_PORT": str(port),
            "INTURN_WEBHOOK_INTERNAL_PORT": str(internal),
            "INTURN_WEBHOOK_PROBE_INTERVAL_S": "0.5",
            "INTURN_WEBHOOK_ROOM_FROM_RECIPIENT": "wa:{recipient}",
            "INTURN_LOG_FORMAT": "json",
            **env,
        }
        service = ServiceProcess(["webhook"], values, tmp_path)
        started.append(service)
        service.wait_ready(f"http://127.0.0.1:{internal}/readyz")
        return service, port, internal

    try:
        yield start
    finally:
        for service in started:
            service.stop()
