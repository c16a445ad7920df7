"""A Pub/Sub topic with an ordered push subscription, on the emulator ``PUBSUB_EMULATOR_HOST`` points at."""

from __future__ import annotations

from typing import Any

from google.cloud import pubsub_v1


def push_topic(project: str, name: str, endpoint: str) -> tuple[Any, str]:
    """Create topic ``name`` and a subscription ``name`` on it with message ordering that pushes to ``endpoint``
    (ack deadline 10 s, the minimum); returns a publisher with ordering on (stop it when done) and the topic's path."""
    publisher = pubsub_v1.PublisherClient(
        publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
    )
    subscriber = pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(project, name)
    publisher.create_topic(name=topic)
    try:
        subscriber.create_subscription(
            request={
                "name": subscriber.subscription_path(project, name),
                "topic": topic,
                "enable_message_ordering": True,
                "ack_deadline_seconds": 10,
                "push_config": {"push_endpoint": endpoint},
            }
        )
    finally:
        subscriber.close()
    return publisher, topic
