"""The Pub/Sub side the bridge reads in pull mode: a topic and an ordered subscription on it.

``ensure`` creates what is missing and checks what exists, so it can run on every deploy or
``inturn dev up``: against the emulator when ``PUBSUB_EMULATOR_HOST`` is set, against a real
project (Application Default Credentials) otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import pubsub_v1

from inturn.errors import ConfigError
from inturn.settings.bridge import DEFAULT_TOPIC

__all__ = ["DEFAULT_TOPIC", "PubsubSetup", "ensure"]


@dataclass(frozen=True)
class PubsubSetup:
    """What ``ensure`` found or made."""

    topic: str  # projects/<project>/topics/<id>
    subscription: str  # projects/<project>/subscriptions/<id>
    created_topic: bool
    created_subscription: bool


def ensure(project: str, topic_id: str, subscription_id: str, *, ack_deadline_s: int = 60) -> PubsubSetup:
    """Create the topic and an ordered subscription on it unless they exist (idempotent).

    Raises ``ConfigError`` when the subscription exists but cannot serve the bridge (no message ordering, or
    attached to another topic) or when Pub/Sub refuses (permissions, project not found).
    """
    publisher = pubsub_v1.PublisherClient()
    subscriber: Any = pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(project, topic_id)
    path = subscriber.subscription_path(project, subscription_id)
    try:
        created_topic = _create(lambda: publisher.create_topic(name=topic))
        created_subscription = _create(
            lambda: subscriber.create_subscription(
                request={
                    "name": path,
                    "topic": topic,
                    "enable_message_ordering": True,
                    "ack_deadline_seconds": ack_deadline_s,
                }
            )
        )
        if not created_subscription:
            existing = subscriber.get_subscription(subscription=path)
            if not existing.enable_message_ordering:
                raise ConfigError(
                    f"subscription {path} exists without message ordering: Pub/Sub would deliver a room's messages "
                    "in any order; delete it and run this again"
                )
            if existing.topic != topic:
                raise ConfigError(f"subscription {path} exists on {existing.topic}, not on {topic}")
    except gexc.GoogleAPICallError as exc:
        raise ConfigError(f"Pub/Sub refused the set-up of {path}: {exc.message}") from exc
    finally:
        subscriber.close()
    return PubsubSetup(topic, path, created_topic, created_subscription)


def _create(call: Any) -> bool:
    """Run a create call; False when the resource already existed."""
    try:
        call()
    except gexc.AlreadyExists:
        return False
    return True
