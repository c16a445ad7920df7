"""A real PostgreSQL server (Debian's package) in a temporary directory on a free loopback port.

``initdb`` refuses to run as root, so when this process is root the server runs as the
``postgres`` system user that Debian's package creates.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from inturn_devtools.process import free_port, port_open
from inturn_devtools.waiting import wait_until

DB_NAME = "inturn"
DB_USER = "inturn"


def pg_bin(name: str) -> str:
    """Path of a PostgreSQL server binary (``initdb``, ``pg_ctl``), newest version first."""
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    found = candidates[0] if candidates else shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} not found: install PostgreSQL's server (apt-get install postgresql)")
    return found


class LocalPostgres:
    """One PostgreSQL server with database ``inturn`` owned by user ``inturn`` (trust auth on loopback)."""

    def __init__(self, workdir: Path | None = None) -> None:
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="inturn-pg-"))
        self.port = free_port()
        self.data = self.workdir / "data"
        self.log_file = self.workdir / "postgres.log"
        self._run_as: str | None = "postgres" if os.geteuid() == 0 else None

    @property
    def dsn(self) -> str:
        """DSN of the ``inturn`` database."""
        return f"postgresql://{DB_USER}@127.0.0.1:{self.port}/{DB_NAME}"

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self._run_as, "--", *args] if self._run_as else list(args)

    def start(self, timeout: float = 60.0) -> LocalPostgres:
        """initdb on first start, start the server, create the database; wait until it accepts connections."""
        first = not (self.data / "PG_VERSION").exists()
        if first:
            self.workdir.mkdir(parents=True, exist_ok=True)
            if self._run_as:
                user = pwd.getpwnam(self._run_as)
                os.chown(self.workdir, user.pw_uid, user.pw_gid)
            subprocess.run(
                self._cmd(
                    pg_bin("initdb"),
                    "-D",
                    str(self.data),
                    "-U",
                    DB_USER,
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-locale",
                    "--no-sync",
                ),
                check=True,
                stdout=subprocess.DEVNULL,
            )
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.workdir} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        subprocess.run(
            self._cmd(
                pg_bin("pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                options,
                "-l",
                str(self.log_file),
                "-w",
                "-t",
                str(int(timeout)),
                "start",
            ),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wait_until(
            lambda: port_open(self.port), timeout, f"PostgreSQL on port {self.port}", every=0.1, log=self.log_file
        )
        if first:
            subprocess.run(
                self._cmd(
                    shutil.which("createdb") or pg_bin("createdb"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-U",
                    DB_USER,
                    DB_NAME,
                ),
                check=True,
            )
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``pg_ctl stop -m fast``); data is kept so ``start()`` resumes it."""
        if (self.data / "postmaster.pid").exists():
            subprocess.run(
                self._cmd(pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"),
                check=False,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    def cleanup(self) -> None:
        """Stop and delete the data directory."""
        self.stop(mode="immediate")
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.cleanup()
