"""Statuses off the workers' path, through real Kafka: a message's deciding status on the acks topic, its later ones
on the statuses topic, and what one replica cannot know on the acks topic (docs/webhook.md)."""

from __future__ import annotations

import pytest

from inturn import schemas
from inturn.schemas import Ack
from inturn.settings.webhook import WebhookSettings

from .support import Webhook, meta_payload, meta_status, read_topic, record_count, started

pytestmark = pytest.mark.kafka


def _statuses(settings: WebhookSettings, topic: str, expected: int) -> list[tuple[str, str, str]]:
    """(key, platform message id, status) of the first ``expected`` records of ``topic``."""
    out = []
    for key, _, value in read_topic(settings, topic, expected):
        ack = schemas.decode(Ack, value)
        out.append((key, ack.platform_message_id, ack.status.value))
    return out


async def test_later_statuses_of_a_decided_message_reach_the_statuses_topic_and_undecided_ones_the_acks_topic(
    webhook: Webhook, webhook_settings: WebhookSettings
) -> None:
    settings = webhook.settings
    for status in ("sent", "delivered", "read"):  # one status per request, as WhatsApp calls back
        response = await webhook.post_meta(meta_payload(meta_status("wamid.A", status, room="room-a", message="m-a")))
        assert response.status_code == 200, response.text
        assert response.json()["published"] == 1
    # Another replica (its own memory: it never saw wamid.A decided) gets A's read again and B's sent then delivered.
    async with started(webhook_settings) as other:
        for pmid, status in (("wamid.A", "failed"), ("wamid.B", "sent"), ("wamid.B", "delivered")):
            payload = meta_payload(meta_status(pmid, status, room="room-b", message=f"m-{pmid}"))
            assert (await other.post_meta(payload)).status_code == 200
    assert sorted(_statuses(settings, settings.topic_acks, 3)) == [
        ("room-a", "wamid.A", "sent"),
        ("room-b", "wamid.A", "failed"),  # this replica could not know A was decided: to the workers, as before
        ("room-b", "wamid.B", "sent"),
    ]
    assert sorted(_statuses(settings, settings.topic_statuses, 3)) == [
        ("room-a", "wamid.A", "delivered"),
        ("room-a", "wamid.A", "read"),
        ("room-b", "wamid.B", "delivered"),
    ]
    # Nothing more on either topic: every status is on exactly one of them.
    assert record_count(settings, settings.topic_acks) == 3
    assert record_count(settings, settings.topic_statuses) == 3
