"""``inturn pubsub setup``: the Pub/Sub topic and the ordered subscription the bridge reads."""

from __future__ import annotations

import argparse

from inturn.settings import load
from inturn.settings.bridge import DEFAULT_TOPIC, BridgeSettings
from inturn_cli import reach
from inturn_cli.actions import add_actions
from inturn_cli.output import add_json, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``pubsub`` and its actions (importing no Pub/Sub client: every ``inturn`` process builds this parser)."""
    parser = sub.add_parser(
        "pubsub",
        help="create the Pub/Sub topic and ordered subscription the bridge reads",
        description="Create the topic the chat backend publishes to and a subscription on it with message "
        "ordering enabled, unless they exist (idempotent; an existing subscription without ordering is an "
        "error). Uses the emulator when PUBSUB_EMULATOR_HOST is set, else Application Default Credentials.",
    )
    actions = add_actions(parser)
    setup = actions.add_parser("setup", help="create the topic and the ordered subscription (idempotent)")
    setup.add_argument("--project", help="GCP project (default: INTURN_BRIDGE_PROJECT)")
    setup.add_argument("--topic", default=DEFAULT_TOPIC, help=f"topic id the backend publishes to ({DEFAULT_TOPIC})")
    setup.add_argument("--subscription", help="subscription id (default: INTURN_BRIDGE_SUBSCRIPTION)")
    add_json(setup)
    setup.set_defaults(handler=_setup)


def _setup(args: argparse.Namespace) -> int:
    from inturn_bridge.subscription import ensure

    settings = load(BridgeSettings)
    project = args.project or settings.bridge_project
    subscription = args.subscription or settings.bridge_subscription
    reach.pubsub_probe(f"projects/{project}/topics/{args.topic}")  # within seconds, rather than the calls' retries
    done = reach.pubsub("setting up the topic and subscription", lambda: ensure(project, args.topic, subscription))
    if args.json:
        print_json(
            {
                "topic": done.topic,
                "created_topic": done.created_topic,
                "subscription": done.subscription,
                "created_subscription": done.created_subscription,
                "ordered": True,
            }
        )
        return 0
    print(f"topic: {done.topic} ({'created' if done.created_topic else 'existed'})")
    print(f"subscription: {done.subscription} ({'created' if done.created_subscription else 'existed'}, ordered)")
    return 0
