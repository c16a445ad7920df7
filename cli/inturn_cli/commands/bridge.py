"""``inturn bridge``: run the Pub/Sub -> Kafka bridge (pull or push)."""

from __future__ import annotations

import argparse

from inturn.settings import load
from inturn.settings.bridge import BridgeSettings
from inturn_cli.flags import given


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bridge``."""
    parser = sub.add_parser(
        "bridge",
        help="run the Pub/Sub -> Kafka bridge",
        description="Move Pub/Sub messages (ordering key = room) onto inturn's messages topic, acking each "
        "only after Kafka confirmed it. Settings: INTURN_BRIDGE_* and INTURN_KAFKA_*/INTURN_TOPIC_*; the "
        "emulator through PUBSUB_EMULATOR_HOST. Stops gracefully on SIGTERM. See docs/bridge.md.",
    )
    parser.add_argument("--mode", choices=["pull", "push"], help="pull (streaming pull) or push (HTTP endpoint)")
    parser.add_argument("--port", type=int, help="HTTP port: push endpoint and probes (INTURN_BRIDGE_HTTP_PORT)")
    parser.add_argument("--subscription", help="subscription id in pull mode (INTURN_BRIDGE_SUBSCRIPTION)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    options = given(args, mode="bridge_mode", port="bridge_http_port", subscription="bridge_subscription")
    settings = load(BridgeSettings, **options)
    from inturn_bridge.service import run  # the service is imported only when it runs

    return run(settings)
