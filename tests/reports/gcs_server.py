"""A local Google Cloud Storage server for the report's gs:// tests: fake-gcs-server (a Go program, built from the
Go module proxy by scripts/install-fake-gcs-server.sh into the cache), on a loopback port, objects in memory.

The tests skip, naming the script, when the binary has not been built: building it takes minutes, so no test
builds it (CI's setup does)."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from inturn_devtools.process import free_port, stop_group
from inturn_devtools.waiting import wait_until

#: The pinned version (scripts/install-fake-gcs-server.sh), whose cache dir holds the binary.
VERSION = "v1.56.1"


def binary() -> Path:
    """Where scripts/install-fake-gcs-server.sh puts the binary (scripts/go-tool.sh's cache dir)."""
    cache = os.environ.get("INTURN_CACHE_DIR") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inturn"
    )
    return Path(cache) / f"fake-gcs-server-{VERSION}" / "bin" / "fake-gcs-server"


def require_binary() -> Path:
    """The binary, or a skip saying how to build it."""
    path = binary()
    if not path.is_file():
        pytest.skip(f"fake-gcs-server {VERSION} is not built ({path}): run scripts/install-fake-gcs-server.sh")
    return path


@dataclass(frozen=True)
class GcsServer:
    endpoint: str  # root URL, e.g. http://127.0.0.1:4443

    def create_bucket(self, name: str) -> None:
        """A bucket through the JSON API, as a platform's console would make it (not through the code under test)."""
        request = urllib.request.Request(  # noqa: S310  # a loopback http URL built here
            f"{self.endpoint}/storage/v1/b?project=inturn-test",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310  # a loopback http URL built here
            assert answer.status == 200, answer.status

    def put(self, bucket: str, name: str, data: bytes) -> None:
        """One object, uploaded through the JSON API (not through the code under test)."""
        url = f"{self.endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={urllib.parse.quote(name)}"
        request = urllib.request.Request(url, data=data, method="POST")  # noqa: S310  # a loopback http URL built here
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310  # a loopback http URL built here
            assert answer.status == 200, answer.status

    def get(self, bucket: str, name: str) -> bytes:
        """One object's bytes, through the JSON API."""
        url = f"{self.endpoint}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"
        with urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310  # a loopback http URL built here
            data: bytes = answer.read()
            return data

    def object_names(self, bucket: str, prefix: str) -> list[str]:
        """The names of the objects under ``prefix``, through the JSON API, sorted."""
        names: list[str] = []
        token = ""
        while True:
            url = f"{self.endpoint}/storage/v1/b/{bucket}/o?prefix={prefix}" + (f"&pageToken={token}" if token else "")
            with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310  # a loopback http URL built here
                page = json.load(answer)
            names += [item["name"] for item in page.get("items", [])]
            token = page.get("nextPageToken", "")
            if not token:
                return sorted(names)


@contextmanager
def gcs_server(tmp: Path) -> Iterator[GcsServer]:
    """fake-gcs-server on a free loopback port (plain HTTP, objects in memory), stopped on exit."""
    path = require_binary()
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = tmp / "fake-gcs-server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(  # the pinned binary, fixed arguments
            [str(path), "-backend", "memory", "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
             "-external-url", endpoint, "-public-host", f"127.0.0.1:{port}", "-log-level", "warn"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:

        def answers() -> bool:
            with urllib.request.urlopen(f"{endpoint}/storage/v1/b", timeout=2) as answer:  # noqa: S310  # loopback
                return bool(answer.status == 200)

        wait_until(answers, 60, f"fake-gcs-server on {endpoint}", ignore=(OSError,), proc=proc, log=log)
        yield GcsServer(endpoint)
    finally:
        stop_group(proc)
