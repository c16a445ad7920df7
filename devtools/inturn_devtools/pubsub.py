"""The gcloud Pub/Sub emulator on a free loopback port (``gcloud beta emulators pubsub start``)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from inturn_devtools.process import free_port, stop_group
from inturn_devtools.waiting import wait_until


class LocalPubSub:
    """One emulator process group; clients reach it through ``PUBSUB_EMULATOR_HOST=<host>``."""

    def __init__(self, workdir: Path | None = None) -> None:
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="inturn-pubsub-"))
        self.port = free_port()
        self.log_file = self.workdir / "emulator.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        """The value for ``PUBSUB_EMULATOR_HOST``."""
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> LocalPubSub:
        """Start the emulator and wait until it answers HTTP."""
        gcloud = shutil.which("gcloud")
        if gcloud is None:
            raise RuntimeError("gcloud not found: install google-cloud-cli and google-cloud-cli-pubsub-emulator")
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            self._proc = subprocess.Popen(
                [
                    gcloud,
                    "beta",
                    "emulators",
                    "pubsub",
                    "start",
                    f"--host-port={self.host}",
                    f"--data-dir={self.workdir / 'data'}",
                    "--quiet",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_until(
            self._ready, timeout, f"Pub/Sub emulator on {self.host}", every=0.1, proc=self._proc, log=self.log_file
        )
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}/", timeout=1) as resp:
                return int(resp.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    @property
    def pid(self) -> int | None:
        """Process id of the running server (leader of its own process group), if started here."""
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        """Stop the emulator's whole process group."""
        if self._proc is not None:
            stop_group(self._proc, 15)
            self._proc = None

    def cleanup(self) -> None:
        """Stop and delete the data directory."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalPubSub:
        return self.start()

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.cleanup()
