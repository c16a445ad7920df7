"""inturn's ack webhook: platform status callbacks in, acks keyed by room on Kafka out (docs/webhook.md)."""

from inturn_webhook.app import app_from_env, create_app

__all__ = ["app_from_env", "create_app"]
