"""A real Apache Kafka in KRaft mode on loopback: one broker, or a cluster of three.

One broker runs in combined mode (broker and controller in one process). A cluster runs a separate
controller quorum: one controller-only process (node 100) and three broker-only processes (nodes 1-3), as
production clusters with dedicated controllers do; any brokers can be killed, stopped or rolled while the
controller keeps electing leaders and shrinking in-sync replica sets (the controller itself is not a fault
target). A cluster's defaults are a replicated cluster's: replication factor 3 for every topic
(``__consumer_offsets`` included), ``min.insync.replicas`` 2, unclean leader election off.

The jars come from Maven Central through ``pom.xml`` beside this file (the version is pinned
there) and are cached under ``cache_dir()/kafka-<version>/lib``; the first run needs ``mvn``.
"""

from __future__ import annotations

import base64
import functools
import re
import shutil
import subprocess
import tempfile
import time
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


CONTROLLER_ID = 100  # a cluster's controller node


class _Node:
    """One KRaft node (broker+controller, broker only or controller only) with its own data directory, ports
    and log file."""

    def __init__(
        self,
        node_id: int,
        workdir: Path,
        heap_mb: int,
        roles: str = "broker,controller",
        proxied_port: int | None = None,
        *,
        jmx: bool = False,
    ) -> None:
        self.node_id = node_id
        self.roles = roles
        self.workdir = workdir
        self.heap_mb = heap_mb
        #: The broker's JMX port on loopback (no authentication: loopback only), when asked for (``BrokerMetrics``).
        self.jmx_port = free_port() if jmx else None
        self.port = free_port()
        self.controller_port = free_port()
        # ``proxied_port``: a second listener (``proxied_listener_port``) that advertises ``127.0.0.1:proxied_port``,
        # where a test's TCP proxy listens and forwards to it: clients bootstrapped there stay behind the proxy.
        self.proxied_port = proxied_port
        self.proxied_listener_port = free_port() if proxied_port is not None else None
        self.log_file = workdir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def java(self, main: str, *args: str, log: Path) -> list[str]:
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

    def write_config(self, voters: str, replication: int) -> Path:
        data = self.workdir / "data"
        config = self.workdir / "server.properties"
        min_isr = max(1, replication - 1)
        listeners = {
            "broker,controller": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "broker": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller": f"CONTROLLER://127.0.0.1:{self.controller_port}",
        }[self.roles]
        advertised_at = f"PLAINTEXT://127.0.0.1:{self.port}"
        protocols = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        if self.proxied_port is not None:
            listeners += f",PROXIED://127.0.0.1:{self.proxied_listener_port}"
            advertised_at += f",PROXIED://127.0.0.1:{self.proxied_port}"
            protocols += ",PROXIED:PLAINTEXT"
        advertised = [] if self.roles == "controller" else [f"advertised.listeners={advertised_at}"]
        config.write_text(
            "\n".join(
                [
                    f"process.roles={self.roles}",
                    f"node.id={self.node_id}",
                    f"controller.quorum.voters={voters}",
                    f"listeners={listeners}",
                    *advertised,
                    "controller.listener.names=CONTROLLER",
                    f"listener.security.protocol.map={protocols}",
                    "inter.broker.listener.name=PLAINTEXT",
                    f"log.dirs={data}",
                    "num.network.threads=2",
                    "num.io.threads=4",
                    "auto.create.topics.enable=false",
                    f"default.replication.factor={replication}",
                    f"min.insync.replicas={min_isr}",
                    "unclean.leader.election.enable=false",
                    f"offsets.topic.replication.factor={replication}",
                    "offsets.topic.num.partitions=8",
                    f"transaction.state.log.replication.factor={replication}",
                    f"transaction.state.log.min.isr={min_isr}",
                    "group.initial.rebalance.delay.ms=0",
                    # Short session timeouts let fault tests move partitions within seconds.
                    "group.min.session.timeout.ms=1000",
                    "log.retention.check.interval.ms=60000",
                    # A cluster on a loaded 2-core box: generous enough that a busy node is not fenced, short
                    # enough that a killed one is (and leaves the in-sync replicas) within seconds.
                    "broker.session.timeout.ms=9000",
                    "broker.heartbeat.interval.ms=1500",
                    "replica.lag.time.max.ms=15000",
                    "controlled.shutdown.enable=true",
                    "",
                ]
            )
        )
        return config

    def format(self, voters: str, replication: int, cluster_id: str) -> subprocess.Popen[bytes] | None:
        """Start formatting the storage if it never was (None when it was): the caller waits for it."""
        config = self.write_config(voters, replication)
        if (self.workdir / "data" / "meta.properties").exists():
            return None
        # The id may start with "-": passed as --cluster-id=<id> so it is never read as an option.
        fmt_log = self.workdir / "format.log"
        return subprocess.Popen(
            self.java(
                "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(config), log=fmt_log
            ),
            stdout=subprocess.DEVNULL,
        )

    def start(self, voters: str, replication: int, cluster_id: str) -> None:
        formatting = self.format(voters, replication, cluster_id)
        if formatting is not None and formatting.wait() != 0:
            raise RuntimeError(f"formatting Kafka storage in {self.workdir} failed (see format.log)")
        config = self.workdir / "server.properties"
        with (self.workdir / "stdout.log").open("ab") as out:
            self.proc = subprocess.Popen(
                self.java("kafka.Kafka", str(config), log=self.log_file),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop(self, timeout: float) -> None:
        if self.proc is not None:
            stop_group(self.proc, timeout)
            self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


class LocalKafka:
    """Apache Kafka in KRaft combined mode: one node (the default) or a cluster of ``brokers`` (3) on loopback.

    ``stop()`` followed by ``start()`` restarts every node with its data (for fault tests). On a cluster, one
    node at a time: ``leader`` finds a partition's leader, ``kill_broker`` SIGKILLs a node, ``stop_broker`` /
    ``start_broker`` stop it cleanly (controlled shutdown) and start it again with its data, ``roll`` restarts
    all of them one after the other, each back in every in-sync replica set before the next goes.
    """

    def __init__(
        self,
        workdir: Path | None = None,
        heap_mb: int | None = None,
        brokers: int = 1,
        proxied_port: int | None = None,
        *,
        jmx: bool = False,
    ) -> None:
        if brokers < 1:
            raise ValueError("a Kafka cluster needs at least one broker")
        if (proxied_port is not None or jmx) and brokers != 1:
            raise ValueError("a proxied listener and JMX are offered on a single broker only")
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="inturn-kafka-"))
        # Three JVMs share the box with everything else: small heaps (ample for test topics).
        self.heap_mb = heap_mb if heap_mb is not None else (512 if brokers == 1 else 320)
        self.brokers = brokers
        self.replication = 3 if brokers >= 3 else 1
        self._cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self._admin_client: AdminClient | None = None
        self.nodes: dict[int, _Node] = {}  # the brokers, by node id
        self.controller: _Node | None = None  # a cluster's own controller (a single broker is its own)
        if brokers == 1:
            self.workdir.mkdir(parents=True, exist_ok=True)
            self.nodes[1] = _Node(1, self.workdir, self.heap_mb, proxied_port=proxied_port, jmx=jmx)
        else:
            for node_id in range(1, brokers + 1):
                (self.workdir / f"broker{node_id}").mkdir(parents=True, exist_ok=True)
                self.nodes[node_id] = _Node(node_id, self.workdir / f"broker{node_id}", self.heap_mb, "broker")
            (self.workdir / "controller").mkdir(parents=True, exist_ok=True)
            self.controller = _Node(CONTROLLER_ID, self.workdir / "controller", 256, "controller")
        first = self.nodes[1]
        self.port = first.port
        self.controller_port = (self.controller or first).controller_port
        self.log_file = first.log_file
        self.proxied_port = first.proxied_port
        self.proxied_listener_port = first.proxied_listener_port
        self.jmx_port = first.jmx_port

    @property
    def bootstrap(self) -> str:
        """The bootstrap address clients use (every node)."""
        return ",".join(node.bootstrap for node in self.nodes.values())

    @property
    def voters(self) -> str:
        """The controller quorum every node is configured with (``id@host:port``)."""
        voter = self.controller or self.nodes[1]
        return f"{voter.node_id}@127.0.0.1:{voter.controller_port}"

    def start(self, timeout: float = 300.0) -> LocalKafka:
        """Format storage on first start, launch every node, and wait until the cluster serves metadata."""
        nodes = [*([self.controller] if self.controller else []), *self.nodes.values()]
        # The first formats run side by side: each is a JVM start of its own.
        formatting = [node.format(self.voters, self.replication, self._cluster_id) for node in nodes]
        if any(f is not None and f.wait() != 0 for f in formatting):
            raise RuntimeError(f"formatting Kafka storage under {self.workdir} failed (see its format.log files)")
        for node in nodes:
            if not node.running:
                node.start(self.voters, self.replication, self._cluster_id)
        self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout: float = 300.0) -> None:
        """Wait until every running node is registered with the cluster and a node answers metadata."""
        for node in self.nodes.values():
            if node.running:
                wait_until(
                    functools.partial(self._registered, node),
                    timeout,
                    f"Kafka node {node.node_id} on {node.bootstrap}",
                    every=0.2,
                    proc=node.proc,
                    log=node.log_file,
                )

    def _admin(self) -> AdminClient:
        """One admin client for the cluster's queries (its connection errors while a broker is away are expected:
        only critical ones are logged)."""
        if self._admin_client is None:
            self._admin_client = AdminClient(
                {"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 5000, "log_level": 2}
            )
        return self._admin_client

    def _registered(self, node: _Node) -> bool:
        if not port_open(node.port):
            return False
        try:
            meta = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=2)
        except KafkaException:  # not serving metadata yet
            return False
        return node.node_id in meta.brokers

    def _ready(self) -> bool:
        return all(self._registered(node) for node in self.nodes.values() if node.running)

    @property
    def pid(self) -> int | None:
        """Process id of the first node's server (leader of its own process group), if started here."""
        proc = self.nodes[1].proc
        return proc.pid if proc is not None else None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every node (SIGTERM, then SIGKILL after ``timeout``); data is kept."""
        for node in reversed(self.nodes.values()):
            node.stop(timeout)
        if self.controller is not None:
            self.controller.stop(timeout)

    def kill(self) -> None:
        """SIGKILL every node, as a crash would."""
        for node in self.nodes.values():
            node.kill()
        if self.controller is not None:
            self.controller.kill()

    def cleanup(self) -> None:
        """Stop and delete the data directories."""
        if self.brokers > 1:
            self.kill()  # the data goes too: nothing to shut down cleanly for
        else:
            self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # One node at a time (a cluster's faults).

    def partition_state(self, topic: str, partition: int, timeout: float = 10.0) -> tuple[int, list[int], list[int]]:
        """A partition's leader (-1 when it has none), replicas and in-sync replicas, as the cluster reports them
        (``KeyError`` while the answering broker does not know the topic yet)."""
        meta = self._admin().list_topics(topic, timeout=timeout)
        part = meta.topics[topic].partitions[partition]
        return part.leader, list(part.replicas), list(part.isrs)

    def leader(self, topic: str, partition: int, timeout: float = 60.0) -> int:
        """The node id leading ``topic``/``partition`` (waits until it has one)."""
        found: list[int] = []

        def has_leader() -> bool:
            leader = self.partition_state(topic, partition)[0]
            if leader in self.nodes and self.nodes[leader].running:
                found.append(leader)
                return True
            return False

        wait_until(
            has_leader, timeout, f"a leader of {topic}/{partition}", every=0.2, ignore=(KafkaException, KeyError)
        )
        return found[-1]

    def in_sync(self, topic: str, partitions: int) -> dict[int, list[int]]:
        """Each partition's in-sync replicas (node ids, sorted)."""
        meta = self._admin().list_topics(topic, timeout=10)
        return {p: sorted(meta.topics[topic].partitions[p].isrs) for p in range(partitions)}

    def wait_in_sync(self, topics: list[str] | None = None, timeout: float = 120.0) -> None:
        """Wait until every partition of ``topics`` (default: every topic) has all its replicas in sync."""

        def all_in_sync() -> bool:
            meta = self._admin().list_topics(timeout=10)
            names = topics if topics is not None else list(meta.topics)
            if any(t not in meta.topics for t in names):
                return False  # not in this broker's metadata yet
            parts = [p for t in names for p in meta.topics[t].partitions.values()]
            return all(sorted(p.isrs) == sorted(p.replicas) for p in parts)

        wait_until(
            all_in_sync, timeout, f"replicas of {topics or 'every topic'} in sync", every=0.5, ignore=(KafkaException,)
        )

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL node ``node_id`` (its data stays; ``start_broker`` brings it back)."""
        self.nodes[node_id].kill()

    def stop_broker(self, node_id: int, timeout: float = 60.0) -> None:
        """Stop node ``node_id`` cleanly (SIGTERM: controlled shutdown hands its leaderships over first)."""
        self.nodes[node_id].stop(timeout)

    def start_broker(self, node_id: int, timeout: float = 300.0) -> None:
        """Start node ``node_id`` again with its data and wait until it is registered."""
        node = self.nodes[node_id]
        if not node.running:
            node.start(self.voters, self.replication, self._cluster_id)
        wait_until(
            lambda: self._registered(node),
            timeout,
            f"Kafka node {node_id} back on {node.bootstrap}",
            every=0.2,
            proc=node.proc,
            log=node.log_file,
        )

    def roll(self, topics: list[str], timeout: float = 120.0) -> list[float]:
        """Restart every node in turn (clean stop, start, wait until ``topics`` are fully in sync again);
        returns each node's seconds away."""
        away = []
        for node_id in self.nodes:
            stopped = time.monotonic()
            self.stop_broker(node_id)
            self.start_broker(node_id, timeout)
            away.append(time.monotonic() - stopped)
            self.wait_in_sync(topics, timeout)
        return away

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
