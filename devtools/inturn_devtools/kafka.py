"""A real Apache Kafka broker in KRaft combined mode (broker + controller) on loopback.

The jars come from Maven Central through ``pom.xml`` beside this file (the version is pinned
there) and are cached under ``cache_dir()/kafka-<version>/lib``; the first run needs ``mvn``.
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from types import TracebackType

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from inturn.cache import cache_dir
from inturn_devtools.process import free_port, port_open, stop_group
from inturn_devtools.waiting import wait_until

_HERE = Path(__file__).parent / "kafka"
_POM = _HERE / "pom.xml"
_LOG4J = _HERE / "log4j2.properties"
KAFKA_VERSION = re.search(r"<kafka.version>([^<]+)</kafka.version>", _POM.read_text()).group(1)  # type: ignore[union-attr]  # the pom always has it


def kafka_lib_dir() -> Path:
    """The folder holding the broker's jars, resolved from Maven Central on first use."""
    lib = cache_dir() / f"kafka-{KAFKA_VERSION}" / "lib"
    marker = lib / ".complete"
    if marker.exists():
        return lib
    if shutil.which("mvn") is None:
        raise RuntimeError("mvn not found: install Maven (apt-get install maven) to fetch the Kafka jars")
    staging = lib.with_name("lib.partial")
    shutil.rmtree(staging, ignore_errors=True)
    subprocess.run(
        ["mvn", "-q", "-B", "-f", str(_POM), "dependency:copy-dependencies", f"-DoutputDirectory={staging}"],
        check=True,
    )
    shutil.rmtree(lib, ignore_errors=True)
    staging.rename(lib)
    marker.touch()
    return lib


class LocalKafka:
    """One KRaft broker+controller with its own data directory, ports and log file.

    ``stop()`` followed by ``start()`` restarts the same broker with its data (for fault tests).
    """

    def __init__(self, workdir: Path | None = None, heap_mb: int = 512, *, jmx: bool = False) -> None:
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="inturn-kafka-"))
        self.heap_mb = heap_mb
        #: The broker's JMX port on loopback (no authentication: loopback only), when asked for (``BrokerMetrics``).
        self.jmx_port = free_port() if jmx else None
        self.port = free_port()
        self.controller_port = free_port()
        self.log_file = self.workdir / "server.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """The bootstrap address clients use."""
        return f"127.0.0.1:{self.port}"

    def _java(self, main: str, *args: str, log: Path) -> list[str]:
        lib = kafka_lib_dir()
        return [
            "java",
            f"-Xmx{self.heap_mb}m",
            f"-Xms{min(self.heap_mb, 256)}m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={_LOG4J}",
            f"-Dinturn.kafka.logfile={log}",
            *(self._jmx_flags() if main == "kafka.Kafka" else []),
            "-cp",
            f"{lib}/*",
            main,
            *args,
        ]

    def _jmx_flags(self) -> list[str]:
        if self.jmx_port is None:
            return []
        return [
            f"-Dcom.sun.management.jmxremote.port={self.jmx_port}",
            f"-Dcom.sun.management.jmxremote.rmi.port={self.jmx_port}",
            "-Dcom.sun.management.jmxremote.host=127.0.0.1",
            "-Djava.rmi.server.hostname=127.0.0.1",
            "-Dcom.sun.management.jmxremote.authenticate=false",
            "-Dcom.sun.management.jmxremote.ssl=false",
        ]

    def _write_config(self) -> Path:
        data = self.workdir / "data"
        config = self.workdir / "server.properties"
        config.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "inter.broker.listener.name=PLAINTEXT",
                    f"log.dirs={data}",
                    "num.network.threads=2",
                    "num.io.threads=4",
                    "auto.create.topics.enable=false",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=8",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    # Short session timeouts let fault tests move partitions within seconds.
                    "group.min.session.timeout.ms=1000",
                    "log.retention.check.interval.ms=60000",
                    "",
                ]
            )
        )
        return config

    def start(self, timeout: float = 60.0) -> LocalKafka:
        """Format storage on first start, launch the broker, and wait until it serves metadata."""
        config = self._write_config()
        if not (self.workdir / "data" / "meta.properties").exists():
            # The id may start with "-": passed as --cluster-id=<id> so it is never read as an option.
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            fmt_log = self.workdir / "format.log"
            subprocess.run(
                self._java(
                    "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(config), log=fmt_log
                ),
                check=True,
                stdout=subprocess.DEVNULL,
            )
        with (self.workdir / "stdout.log").open("ab") as out:
            self._proc = subprocess.Popen(
                self._java("kafka.Kafka", str(config), log=self.log_file),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_until(
            self._ready, timeout, f"Kafka broker on {self.bootstrap}", every=0.1, proc=self._proc, log=self.log_file
        )
        return self

    def _ready(self) -> bool:
        if not port_open(self.port):
            return False
        try:
            meta = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=2)
        except KafkaException:  # not serving metadata yet
            return False
        return len(meta.brokers) > 0

    @property
    def pid(self) -> int | None:
        """Process id of the running server (leader of its own process group), if started here."""
        return self._proc.pid if self._proc is not None else None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout``); data is kept."""
        if self._proc is not None:
            stop_group(self._proc, timeout)
            self._proc = None

    def kill(self) -> None:
        """SIGKILL the broker, as a crash would."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(10)
            self._proc = None

    def cleanup(self) -> None:
        """Stop and delete the data directory."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.cleanup()


class BrokerMetrics:
    """The broker's own counters over JMX (``LocalKafka(jmx=True)``): a Java helper (``kafka/BrokerMetrics.java``,
    run as a single-file program) kept open, asked for one snapshot at a time.

    ``snapshot()`` maps each counter to its count: ``("requests", "<Produce|Fetch|...>")`` summed over the request
    versions, and ``("<meter>", "<topic>")`` for the per-topic BrokerTopicMetrics meters (``MessagesInPerSec``,
    ``TotalProduceRequestsPerSec``, ``TotalFetchRequestsPerSec``, ``BytesInPerSec``, ``BytesOutPerSec``, ...).
    """

    def __init__(self, kafka: LocalKafka) -> None:
        if kafka.jmx_port is None:
            raise ValueError("the broker was started without JMX (LocalKafka(jmx=True))")
        self._proc = subprocess.Popen(
            ["java", "-Xmx64m", str(_HERE / "BrokerMetrics.java"), str(kafka.jmx_port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def snapshot(self) -> dict[tuple[str, str], int]:
        """Every counter's count now."""
        if self._proc.stdin is None or self._proc.stdout is None:
            raise RuntimeError("the JMX helper has no pipes")
        self._proc.stdin.write("snapshot\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the JMX helper ended (exit {self._proc.wait(10)})")
        return parse_broker_metrics(line)

    def close(self) -> None:
        """End the helper."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10)


def parse_broker_metrics(line: str) -> dict[tuple[str, str], int]:
    """One line of ``BrokerMetrics.java`` as counters (see ``BrokerMetrics.snapshot``)."""
    counts: dict[tuple[str, str], int] = {}
    for pair in line.rstrip("\n").split("\x01"):
        if not pair:
            continue
        name, _, count = pair.partition("\t")
        domain, _, props = name.partition(":")
        tags = dict(kv.split("=", 1) for kv in props.split(","))
        if domain == "kafka.network":
            key = ("requests", tags.get("request", "?"))
        elif "topic" in tags:
            key = (tags.get("name", "?"), tags["topic"])
        else:
            key = (tags.get("name", "?"), "")
        counts[key] = counts.get(key, 0) + int(float(count))
    return counts
