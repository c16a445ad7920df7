"""``inturn topics create|check``: inturn's four Kafka topics."""

from __future__ import annotations

import argparse

from inturn import topics
from inturn.kafka import make_admin
from inturn.settings import KafkaSettings, load


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``topics`` and its actions."""
    parser = sub.add_parser(
        "topics",
        help="create or check inturn's Kafka topics",
        description="Create the messages, acks, events and dead-letter topics, or check their layout "
        "(messages and acks must have the same partition count). Uses INTURN_KAFKA_BOOTSTRAP, "
        "INTURN_TOPIC_* settings.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create the topics that are missing (idempotent)")
    create.add_argument("--partitions", type=int, help="partitions of new topics (INTURN_TOPIC_PARTITIONS)")
    create.add_argument("--replication", type=int, help="replication factor (INTURN_TOPIC_REPLICATION)")
    create.set_defaults(handler=_create)
    check = actions.add_parser("check", help="exit 1 unless all topics exist with a valid layout")
    check.set_defaults(handler=_check)


def _settings(args: argparse.Namespace) -> KafkaSettings:
    overrides = {}
    if getattr(args, "partitions", None):
        overrides["topic_partitions"] = args.partitions
    if getattr(args, "replication", None):
        overrides["topic_replication"] = args.replication
    return load(KafkaSettings, **overrides)


def _create(args: argparse.Namespace) -> int:
    settings = _settings(args)
    admin = make_admin(settings)
    created = topics.create(admin, settings)
    layout = topics.check(admin, settings)
    print(f"created: {', '.join(created) or 'none (all existed)'}")
    print(f"partitions: messages={layout.messages} acks={layout.acks} events={layout.events} dlq={layout.dlq}")
    return 0


def _check(args: argparse.Namespace) -> int:
    settings = _settings(args)
    layout = topics.check(make_admin(settings), settings)
    print(f"ok: messages={layout.messages} acks={layout.acks} events={layout.events} dlq={layout.dlq}")
    return 0
