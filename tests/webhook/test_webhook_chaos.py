"""The webhook while its own broker is stopped and restarted (``make chaos``)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from inturn import topics
from inturn.kafka import make_admin
from inturn.settings import KafkaSettings
from inturn_devtools import LocalKafka
from inturn_devtools.waiting import eventually

from .support import Webhook, meta_payload, meta_status, record_count, started, webhook_settings_for

pytestmark = [pytest.mark.chaos, pytest.mark.kafka]


async def post_until_accepted(webhook: Webhook, payload: dict[str, Any], seconds: float = 60) -> httpx.Response:
    """POST ``payload`` again while the answer is 503, as the platform does (each try waits the confirm timeout)."""
    answers: list[httpx.Response] = []

    async def accepted() -> bool:
        answers.append(await webhook.post_meta(payload))
        return answers[-1].status_code != 503

    await eventually(accepted, seconds, f"an answer other than 503 to {len(answers)} tries", every=0)
    return answers[-1]


async def test_a_callback_refused_503_while_kafka_is_down_is_published_once_when_the_platform_retries(
    test_id: str,
) -> None:
    broker = await asyncio.to_thread(LocalKafka().start)
    try:
        kafka = KafkaSettings(
            kafka_bootstrap=broker.bootstrap,
            topic_partitions=4,
            **topics.prefixed(f"c{test_id}"),
        )
        topics.create(make_admin(kafka), kafka)
        settings = webhook_settings_for(kafka, webhook_kafka_confirm_timeout_ms=1000)
        before = meta_payload(meta_status("wamid.before", room="r", message="m1"))
        during = meta_payload(meta_status("wamid.during", room="r", message="m2"))
        async with started(settings) as webhook:
            # A fresh broker may take more than the confirm timeout to hand out the producer id: retry like Meta.
            assert (await post_until_accepted(webhook, before)).status_code == 200
            await asyncio.to_thread(broker.stop)
            refused = await webhook.post_meta(during)
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "1"
            await asyncio.to_thread(broker.start)
            # The platform retries until it gets a 200; the first attempt's record may still be on its way.
            retry = await post_until_accepted(webhook, during)
        assert retry.status_code == 200
        assert record_count(kafka, kafka.topic_acks) == 2  # before, and during exactly once
    finally:
        await asyncio.to_thread(broker.cleanup)
