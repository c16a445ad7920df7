"""``inturn topics create|check``: inturn's four Kafka topics."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from inturn import topics
from inturn.settings import KafkaSettings, load
from inturn_cli import reach
from inturn_cli.actions import add_actions
from inturn_cli.flags import given
from inturn_cli.output import add_json, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``topics`` and its actions."""
    parser = sub.add_parser(
        "topics",
        help="create or check inturn's Kafka topics",
        description="Create the messages, acks, events and dead-letter topics, or check them: present, messages and "
        "acks of the same partition count, and nothing that could lose a write Kafka acknowledged. New topics get "
        "min.insync.replicas = replication factor - 1 (at least 1) and unclean.leader.election.enable=false. Uses "
        "INTURN_KAFKA_BOOTSTRAP, INTURN_KAFKA_CLIENT_CONFIG and the INTURN_TOPIC_* settings.",
    )
    actions = add_actions(parser)
    create = actions.add_parser(
        "create",
        help="create the topics that are missing (idempotent)",
        description="Create whichever of the four topics are missing, with INTURN_TOPIC_PARTITIONS partitions "
        "(messages and acks must be equal), INTURN_TOPIC_REPLICATION replicas, min.insync.replicas = "
        "replication - 1 (at least 1) and unclean leader election off. Existing topics are left as they are: "
        "`inturn topics check` says what is wrong with them.",
    )
    create.add_argument("--partitions", type=int, help="partitions of new topics (INTURN_TOPIC_PARTITIONS)")
    create.add_argument("--replication", type=int, help="replication factor of new topics (INTURN_TOPIC_REPLICATION)")
    add_json(create)
    create.set_defaults(handler=_create)
    check = actions.add_parser(
        "check",
        help="exit 1 unless all topics exist, fit together and keep acknowledged writes",
        description="Read the four topics' partition counts, replication factors and effective min.insync.replicas "
        "and unclean.leader.election.enable, and list every problem with the command that fixes it: a missing "
        "topic; messages and acks of different partition counts; replication factor below 3 in production "
        "(INTURN_ENVIRONMENT=production); min.insync.replicas below 2 at a factor of 3 or more; min.insync.replicas "
        "above the factor; unclean leader election on. Exit 0 when there is none, 1 otherwise.",
    )
    add_json(check)
    check.set_defaults(handler=_check)


def _settings(args: argparse.Namespace) -> KafkaSettings:
    return load(KafkaSettings, **given(args, partitions="topic_partitions", replication="topic_replication"))


def _inspect(settings: KafkaSettings) -> tuple[list[topics.TopicState], list[topics.Finding]]:
    reach.kafka_probe(settings)  # a Kafka that does not answer is told within TIMEOUT_S
    admin = reach.kafka_admin(settings)
    with reach.kafka(settings, "reading the topics"):
        states = topics.inspect(admin, settings, timeout=reach.TIMEOUT_S)
    return states, topics.findings(states, production=settings.environment == "production")


def _document(states: list[topics.TopicState], found: list[topics.Finding], **extra: Any) -> dict[str, Any]:
    return {
        **extra,
        "ok": not found,
        "topics": [dataclasses.asdict(s) for s in states],
        "problems": [dataclasses.asdict(f) for f in found],
    }


def _print_states(states: list[topics.TopicState]) -> None:
    for s in states:
        if s.partitions is None:
            print(f"{s.role:8} {s.name}: missing")
            continue
        unclean = {True: "on", False: "off", None: "?"}[s.unclean_leader_election]
        print(
            f"{s.role:8} {s.name}: partitions={s.partitions} replication={s.replication} "
            f"min.insync.replicas={s.min_insync_replicas} unclean.leader.election={unclean}"
        )


def _print_findings(found: list[topics.Finding]) -> None:
    for f in found:
        print(f"problem: {f.topic}: {f.problem}\n  fix: {f.fix}")


def _create(args: argparse.Namespace) -> int:
    settings = _settings(args)
    reach.kafka_probe(settings)  # a Kafka that does not answer is told within TIMEOUT_S
    admin = reach.kafka_admin(settings)
    with reach.kafka(settings, "creating the topics"):
        created = topics.create(admin, settings)
    states, found = _inspect(settings)
    if args.json:
        print_json(_document(states, found, created=created))
    else:
        print(f"created: {', '.join(created) or 'none (all existed)'}")
        _print_states(states)
        _print_findings(found)
    return 0


def _check(args: argparse.Namespace) -> int:
    settings = _settings(args)
    states, found = _inspect(settings)
    if args.json:
        print_json(_document(states, found))
    else:
        _print_states(states)
        _print_findings(found)
        print("ok" if not found else f"{len(found)} problem(s)")
    return 0 if not found else 1
