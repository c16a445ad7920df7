"""``inturn webhook``: the ack webhook server (platform status callbacks -> acks on Kafka)."""

from __future__ import annotations

import argparse
import os


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``webhook``."""
    parser = sub.add_parser(
        "webhook",
        help="run the ack webhook server",
        description="Serve POST /webhooks/whatsapp (Meta's signed status callbacks), GET /webhooks/whatsapp "
        "(verification handshake) and POST /webhooks/generic/{platform}, publishing acks keyed by room to the "
        "acks topic. Refuses to start unless the topics exist with equal messages/acks partition counts. "
        "Settings: INTURN_WEBHOOK_* and INTURN_KAFKA_*, INTURN_TOPIC_* (see docs/webhook.md).",
    )
    parser.add_argument("--host", help="bind address (INTURN_WEBHOOK_HOST)")
    parser.add_argument("--port", type=int, help="port (INTURN_WEBHOOK_PORT)")
    parser.add_argument("--workers", type=int, help="uvicorn worker processes (INTURN_WEBHOOK_WORKERS)")
    parser.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from inturn.settings import load
    from inturn.settings.webhook import WebhookSettings
    from inturn_webhook.serve import run

    # Workers rebuild their settings from the environment: put the flags there too.
    for flag, env in (
        ("host", "INTURN_WEBHOOK_HOST"),
        ("port", "INTURN_WEBHOOK_PORT"),
        ("workers", "INTURN_WEBHOOK_WORKERS"),
    ):
        if getattr(args, flag) is not None:
            os.environ[env] = str(getattr(args, flag))
    run(load(WebhookSettings))
    return 0
