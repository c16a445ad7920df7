"""Durable topics: what ``inturn topics create`` gives a topic, and what ``inturn topics check`` finds, against the
real (single-broker) Kafka. A replication factor of 3 cannot be made on one broker: the rule for it is pinned on
``topics.findings`` and ``topics.min_insync_replicas`` directly."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType

from inturn import topics
from inturn.settings import KafkaSettings
from inturn_cli.main import main


def topic_config(admin: AdminClient, name: str) -> dict[str, tuple[str, int]]:
    """A topic's effective settings as the broker reports them: name -> (value, source)."""
    resource = ConfigResource(ResourceType.TOPIC, name)
    entries = admin.describe_configs([resource])[resource].result(10)
    return {key: (entry.value, entry.source) for key, entry in entries.items()}


@pytest.fixture
def cli_env(kafka_settings: KafkaSettings, monkeypatch: pytest.MonkeyPatch) -> KafkaSettings:
    """The CLI's environment: this test's broker and topic names."""
    monkeypatch.setenv("INTURN_KAFKA_BOOTSTRAP", kafka_settings.kafka_bootstrap)
    for field in ("topic_messages", "topic_acks", "topic_events", "topic_dlq", "topic_statuses", "topic_partitions"):
        monkeypatch.setenv(f"INTURN_{field.upper()}", str(getattr(kafka_settings, field)))
    return kafka_settings


@pytest.mark.kafka
def test_created_topics_carry_min_insync_replicas_and_no_unclean_election(
    cli_env: KafkaSettings, kafka_admin: AdminClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topics", "create", "--json"]) == 0
    created = json.loads(capsys.readouterr().out)
    names = topics.topic_names(cli_env)
    assert created["created"] == names
    for name in names:
        config = topic_config(kafka_admin, name)
        # Set on the topic itself (not inherited from the broker): replication 1 -> min.insync.replicas 1.
        assert config["min.insync.replicas"] == ("1", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert config["unclean.leader.election.enable"] == ("false", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert created["ok"] is True
    assert created["problems"] == []
    assert [(t["role"], t["name"], t["partitions"], t["replication"]) for t in created["topics"]] == [
        ("messages", names[0], 4, 1),
        ("acks", names[1], 4, 1),
        ("events", names[2], 4, 1),
        ("dlq", names[3], 4, 1),
        ("statuses", names[4], 4, 1),
    ]

    assert main(["topics", "check", "--json"]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["ok"] is True
    assert {(t["min_insync_replicas"], t["unclean_leader_election"]) for t in checked["topics"]} == {(1, False)}

    assert main(["topics", "create", "--json"]) == 0  # idempotent
    assert json.loads(capsys.readouterr().out)["created"] == []


@pytest.mark.kafka
def test_events_and_statuses_may_be_created_with_fewer_partitions(
    cli_env: KafkaSettings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("INTURN_TOPIC_EVENTS_PARTITIONS", "1")
    monkeypatch.setenv("INTURN_TOPIC_STATUSES_PARTITIONS", "2")
    assert main(["topics", "create", "--json"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert [(t["role"], t["partitions"]) for t in created["topics"]] == [
        ("messages", 4),
        ("acks", 4),
        ("events", 1),
        ("dlq", 4),
        ("statuses", 2),
    ]
    assert created["problems"] == []  # only messages and acks must be equal


@pytest.mark.kafka
def test_check_names_every_setting_that_could_lose_an_acknowledged_write(
    cli_env: KafkaSettings,
    kafka_admin: AdminClient,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Topics made by hand, badly: unclean election on, min.insync.replicas above the factor, acks with fewer
    partitions than messages, events missing; and in production a replication factor of 1 everywhere."""
    bad = [
        NewTopic(cli_env.topic_messages, 4, 1, config={"unclean.leader.election.enable": "true"}),
        NewTopic(cli_env.topic_acks, 2, 1, config={"min.insync.replicas": "2"}),
        NewTopic(cli_env.topic_dlq, 1, 1),
    ]
    for future in kafka_admin.create_topics(bad).values():
        future.result(30)
    topics.wait_visible(kafka_admin, [t.topic for t in bad])
    monkeypatch.setenv("INTURN_ENVIRONMENT", "production")

    assert main(["topics", "check", "--json"]) == 1
    checked = json.loads(capsys.readouterr().out)
    assert checked["ok"] is False
    by_role = {t["role"]: t for t in checked["topics"]}
    assert by_role["messages"]["unclean_leader_election"] is True
    assert by_role["acks"]["min_insync_replicas"] == 2
    assert by_role["events"]["partitions"] is None
    problems = [(p["topic"], p["problem"].split(":")[0]) for p in checked["problems"]]
    messages, acks, events, dlq, statuses = topics.topic_names(cli_env)
    assert sorted(problems) == sorted(
        [
            (messages, "replication factor 1 in production"),
            (messages, "unclean.leader.election.enable=true"),
            (acks, "replication factor 1 in production"),
            (acks, "min.insync.replicas=2 above replication factor 1"),
            (events, "topic missing"),
            (statuses, "topic missing"),
            (dlq, "replication factor 1 in production"),
            (f"{messages},{acks}", f"{messages} has 4 partitions but {acks} has 2"),
        ]
    )
    fixes = {p["problem"].split(":")[0]: p["fix"] for p in checked["problems"]}
    assert fixes["unclean.leader.election.enable=true"].endswith("--add-config unclean.leader.election.enable=false")
    assert fixes["min.insync.replicas=2 above replication factor 1"].endswith("--add-config min.insync.replicas=1")

    assert main(["topics", "check"]) == 1  # the same as text, for people
    text = capsys.readouterr().out
    assert f"problem: {messages}: unclean.leader.election.enable=true" in text
    assert text.rstrip().endswith("8 problem(s)")


@pytest.mark.parametrize(("replication", "expected"), [(1, 1), (2, 1), (3, 2), (4, 3), (5, 4)])
def test_min_insync_replicas_is_the_factor_less_one_at_least_one(replication: int, expected: int) -> None:
    assert topics.min_insync_replicas(replication) == expected
    assert topics.durability_config(replication) == {
        "min.insync.replicas": str(expected),
        "unclean.leader.election.enable": "false",
    }


def _state(replication: int, isr: int, unclean: bool = False) -> topics.TopicState:
    return topics.TopicState("messages", "m", 12, replication, isr, unclean)


@pytest.mark.parametrize(
    ("state", "production", "expected"),
    [
        (_state(3, 2), True, []),
        (_state(3, 1), False, ["min.insync.replicas=1 at replication factor 3"]),
        (_state(5, 1), True, ["min.insync.replicas=1 at replication factor 5"]),
        (_state(3, 4), False, ["min.insync.replicas=4 above replication factor 3"]),
        (_state(3, 2, unclean=True), False, ["unclean.leader.election.enable=true"]),
        (_state(2, 1), True, ["replication factor 2 in production"]),
        (_state(2, 1), False, []),
        (_state(1, 1), False, []),
    ],
)
def test_findings_of_a_replicated_topic(state: topics.TopicState, production: bool, expected: list[str]) -> None:
    assert [f.problem.split(":")[0] for f in topics.findings([state], production)] == expected
