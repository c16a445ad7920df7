"""Fixtures of the webhook tests: settings on this test's topics and the started application."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from inturn.settings import KafkaSettings
from inturn.settings.webhook import WebhookSettings

from .support import Webhook, started, webhook_settings_for


@pytest.fixture
def webhook_settings(inturn_topics: KafkaSettings) -> WebhookSettings:
    """Webhook settings naming this test's own topics."""
    return webhook_settings_for(inturn_topics)


@pytest.fixture
async def webhook(webhook_settings: WebhookSettings) -> AsyncIterator[Webhook]:
    """The webhook, started, producing to this test's topics."""
    async with started(webhook_settings) as running:
        yield running
