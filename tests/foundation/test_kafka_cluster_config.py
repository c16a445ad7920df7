"""The three-broker launcher's configuration, read back from the files it writes (no JVM started: the cluster
itself runs in the chaos rows of tests/chaos/test_cluster_faults.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inturn_devtools.kafka import CONTROLLER_ID, LocalKafka


def properties(path: Path) -> dict[str, str]:
    """A server.properties file as a dict."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key: value for key, value in pairs}


def test_a_cluster_is_three_brokers_and_a_controller_of_their_own_with_replicated_defaults(tmp_path: Path) -> None:
    kafka = LocalKafka(tmp_path, brokers=3)
    voters = kafka.voters
    for node in kafka.nodes.values():
        node.write_config(voters, kafka.replication)
    assert kafka.controller is not None
    kafka.controller.write_config(voters, kafka.replication)

    brokers = {n: properties(tmp_path / f"broker{n}" / "server.properties") for n in (1, 2, 3)}
    controller = properties(tmp_path / "controller" / "server.properties")
    assert voters == f"{CONTROLLER_ID}@127.0.0.1:{kafka.controller.controller_port}"
    assert controller["process.roles"] == "controller"
    assert controller["listeners"].startswith("CONTROLLER://127.0.0.1:")
    for node_id, config in brokers.items():
        assert config["process.roles"] == "broker"
        assert config["node.id"] == str(node_id)
        assert config["controller.quorum.voters"] == voters
        assert config["listeners"] == f"PLAINTEXT://127.0.0.1:{kafka.nodes[node_id].port}"
        assert (config["default.replication.factor"], config["min.insync.replicas"]) == ("3", "2")
        assert config["unclean.leader.election.enable"] == "false"
        assert config["offsets.topic.replication.factor"] == "3"
    assert kafka.bootstrap == ",".join(f"127.0.0.1:{kafka.nodes[n].port}" for n in (1, 2, 3))
    assert kafka.heap_mb <= 384  # three JVMs on a small box


def test_a_single_broker_stays_one_combined_node_in_its_workdir(tmp_path: Path) -> None:
    kafka = LocalKafka(tmp_path)
    kafka.nodes[1].write_config(kafka.voters, kafka.replication)
    config = properties(tmp_path / "server.properties")
    assert kafka.controller is None
    assert config["process.roles"] == "broker,controller"
    assert (config["default.replication.factor"], config["min.insync.replicas"]) == ("1", "1")
    assert kafka.bootstrap == f"127.0.0.1:{kafka.port}"


def test_a_cluster_of_no_broker_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one broker"):
        LocalKafka(tmp_path, brokers=0)
