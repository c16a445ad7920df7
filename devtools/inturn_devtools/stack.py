"""The whole local stack (Kafka, PostgreSQL, Pub/Sub emulator) for ``inturn dev up|down`` and the demo."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import asdict, dataclass
from pathlib import Path

from inturn_devtools.kafka import LocalKafka
from inturn_devtools.postgres import LocalPostgres
from inturn_devtools.pubsub import LocalPubSub
from inturn_devtools.waiting import wait_until


@dataclass
class StackState:
    """What ``dev up --detach`` leaves behind so ``dev down`` can stop it."""

    kafka_bootstrap: str
    kafka_pid: int
    kafka_workdir: str
    postgres_dsn: str
    postgres_workdir: str
    pubsub_host: str
    pubsub_pid: int
    pubsub_workdir: str

    def env(self) -> dict[str, str]:
        """Environment variables pointing inturn's processes at this stack."""
        return {
            "INTURN_KAFKA_BOOTSTRAP": self.kafka_bootstrap,
            "INTURN_POSTGRES_DSN": self.postgres_dsn,
            "PUBSUB_EMULATOR_HOST": self.pubsub_host,
        }


class LocalStack:
    """Starts and stops the three servers together."""

    def __init__(self) -> None:
        self.kafka = LocalKafka()
        self.postgres = LocalPostgres()
        self.pubsub = LocalPubSub()

    def start(self) -> StackState:
        """Start all three (stopping whatever started if one fails)."""
        try:
            self.kafka.start()
            self.postgres.start()
            self.pubsub.start()
        except BaseException:
            self.stop()
            raise
        return self.state()

    def state(self) -> StackState:
        """The running stack's addresses and processes."""
        if self.kafka.pid is None or self.pubsub.pid is None:
            raise RuntimeError("the stack is not running")
        return StackState(
            kafka_bootstrap=self.kafka.bootstrap,
            kafka_pid=self.kafka.pid,
            kafka_workdir=str(self.kafka.workdir),
            postgres_dsn=self.postgres.dsn,
            postgres_workdir=str(self.postgres.workdir),
            pubsub_host=self.pubsub.host,
            pubsub_pid=self.pubsub.pid,
            pubsub_workdir=str(self.pubsub.workdir),
        )

    def stop(self) -> None:
        """Stop all three and delete their data."""
        self.pubsub.cleanup()
        self.postgres.cleanup()
        self.kafka.cleanup()


def save_state(state: StackState, path: Path) -> None:
    """Write the state file of a detached stack."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(state), indent=2))


def load_state(path: Path) -> StackState:
    """Read the state file of a detached stack."""
    return StackState(**json.loads(path.read_text()))


def stop_detached(state: StackState, timeout: float = 30.0) -> None:
    """Stop a stack started by another process (from its state file), then delete its data."""
    for pid in (state.pubsub_pid, state.kafka_pid):
        _stop_group(pid, timeout)
    LocalPostgres(Path(state.postgres_workdir)).cleanup()
    import shutil

    for workdir in (state.kafka_workdir, state.pubsub_workdir):
        shutil.rmtree(workdir, ignore_errors=True)


def _stop_group(pid: int, timeout: float) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return

    def gone() -> bool:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        return False

    try:
        wait_until(gone, timeout, f"process group {pid} to exit on SIGTERM", every=0.1)
    except TimeoutError:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
