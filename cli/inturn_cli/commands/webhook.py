"""``inturn webhook``: the ack webhook server (platform status callbacks -> acks on Kafka)."""

from __future__ import annotations

import argparse
import os

ROUTES = """\
Serve the platforms' status callbacks and publish each status as an ack keyed by
room to the acks topic. Refuses to start unless the topics exist with equal
messages/acks partition counts.

Public port (INTURN_WEBHOOK_PORT, 8080): the callback routes only.
  POST /webhooks/whatsapp            WhatsApp Cloud API statuses (X-Hub-Signature-256)
  GET  /webhooks/whatsapp            Meta's verification handshake (hub.verify_token)
  POST /webhooks/messenger           Messenger deliveries and reads (X-Hub-Signature-256)
  GET  /webhooks/messenger           Meta's verification handshake
  POST /webhooks/instagram           Instagram webhooks (X-Hub-Signature-256)
  GET  /webhooks/instagram           Meta's verification handshake
  POST /webhooks/twilio              Twilio status callbacks (X-Twilio-Signature)
  POST /webhooks/generic/{platform}  any platform, inturn's JSON acks (X-Inturn-Signature-256)
Telegram has no route: the answer to its send is the ack.

Internal port (INTURN_WEBHOOK_INTERNAL_PORT, 9090), never routed by the Ingress:
  /metrics, /healthz, /readyz, /openapi.json, /docs, /redoc

Settings: INTURN_WEBHOOK_*, INTURN_KAFKA_*, INTURN_TOPIC_* (docs/webhook.md).
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``webhook``."""
    parser = sub.add_parser(
        "webhook",
        help="run the ack webhook server",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=ROUTES,
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
