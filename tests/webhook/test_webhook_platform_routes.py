"""The Messenger, Instagram and Twilio callback routes against a real broker: payloads written from each
platform's documentation, signed as the platform signs them, become acks on Kafka; a wrong signature is 401 and
publishes nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import AsyncIterator
from urllib.parse import urlencode

import orjson
import pytest

from inturn import schemas
from inturn.kafka import partition_for
from inturn.platforms.twilio import status_callback_url
from inturn.schemas import Ack, AckStatus
from inturn.settings import KafkaSettings
from inturn_webhook.signature import sign

from .support import APP_SECRET, Webhook, read_topic, record_count, started, webhook_settings_for

pytestmark = pytest.mark.kafka

TWILIO_TOKEN = "twilio-auth-token"
PAGE, PSID = "1122334455", "6543210"


@pytest.fixture
async def webhook(inturn_topics: KafkaSettings) -> AsyncIterator[Webhook]:
    settings = webhook_settings_for(
        inturn_topics, webhook_twilio_auth_tokens=[TWILIO_TOKEN], webhook_room_from_recipient="fb:{recipient}"
    )
    async with started(settings) as running:
        yield running


def _page(obj: str, *events: object) -> bytes:
    return orjson.dumps({"object": obj, "entry": [{"id": PAGE, "time": 1458692752478, "messaging": list(events)}]})


async def _post_meta(webhook: Webhook, path: str, body: bytes, secret: str = APP_SECRET) -> int:
    headers = {"X-Hub-Signature-256": sign(body, secret.encode()), "Content-Type": "application/json"}
    return (await webhook.client.post(path, content=body, headers=headers)).status_code


async def test_a_messenger_delivery_watermark_becomes_an_ack_of_the_recipients_room(webhook: Webhook) -> None:
    # developers.facebook.com/docs/messenger-platform/reference/webhook-events/message-deliveries (no mids)
    body = _page(
        "page",
        {"sender": {"id": PSID}, "recipient": {"id": PAGE}, "delivery": {"watermark": 1458668856253}},
    )
    assert await _post_meta(webhook, "/webhooks/messenger", body, secret="wrong") == 401
    assert await _post_meta(webhook, "/webhooks/messenger", body) == 200
    [(key, partition, value)] = read_topic(webhook.settings, webhook.settings.topic_acks, 1)
    ack = schemas.decode(Ack, value)
    assert (key, partition) == (f"fb:{PSID}", partition_for(f"fb:{PSID}", 4))
    assert (ack.platform, ack.status, ack.message_id, ack.watermark_ms) == (
        "messenger",
        AckStatus.DELIVERED,
        None,
        1458668856253,
    )


async def test_an_instagram_messaging_seen_becomes_a_read_status_off_the_workers_path(webhook: Webhook) -> None:
    # developers.facebook.com/docs/instagram-platform/webhooks (messaging_seen: read.mid). Instagram's send answer is
    # the ack (AckKind.SYNCHRONOUS): no worker waits for this status, so it goes to the statuses topic.
    seen = {"sender": {"id": PSID}, "recipient": {"id": PAGE}, "timestamp": 1527459824, "read": {"mid": "aWdfZAG1"}}
    body = _page("instagram", seen)
    assert await _post_meta(webhook, "/webhooks/instagram", body) == 200
    [(_, _, value)] = read_topic(webhook.settings, webhook.settings.topic_statuses, 1)
    ack = schemas.decode(Ack, value)
    assert (ack.platform, ack.status, ack.platform_message_id) == ("instagram", AckStatus.READ, "aWdfZAG1")
    assert record_count(webhook.settings, webhook.settings.topic_acks) == 0


def _twilio_signature(url: str, params: dict[str, str], token: str = TWILIO_TOKEN) -> str:
    # twilio.com/docs/usage/security#validating-requests: the URL, then each parameter name and value sorted by name
    data = url + "".join(name + params[name] for name in sorted(params))
    return base64.b64encode(hmac.new(token.encode(), data.encode(), hashlib.sha1).digest()).decode()


async def test_a_twilio_status_callback_signed_over_its_url_reaches_the_partition_in_its_callback_data(
    webhook: Webhook,
) -> None:
    elsewhere = (partition_for("room-t", 4) + 1) % 4
    url = status_callback_url("http://webhook/webhooks/twilio", "room-t", "m-1", elsewhere)
    params = {
        "AccountSid": "AC00000000000000000000000000000001",
        "From": "+15005550006",
        "MessageSid": "SM0123456789abcdef0123456789abcdef",
        "MessageStatus": "delivered",
        "To": "+4917000001",
    }
    body = urlencode(params).encode()
    path = url.removeprefix("http://webhook")
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    wrong = {**form, "X-Twilio-Signature": _twilio_signature(url, params, token="not-the-token")}
    assert (await webhook.client.post(path, content=body, headers=wrong)).status_code == 401
    assert record_count(webhook.settings, webhook.settings.topic_acks) == 0
    signed = {**form, "X-Twilio-Signature": _twilio_signature(url, params)}
    assert (await webhook.client.post(path, content=body, headers=signed)).status_code == 200
    [(key, partition, value)] = read_topic(webhook.settings, webhook.settings.topic_acks, 1)
    ack = schemas.decode(Ack, value)
    assert (key, partition, ack.message_id, ack.status) == ("room-t", elsewhere, "m-1", AckStatus.DELIVERED)
    # Behind a proxy the URL Twilio signed is the public one: rebuilt from X-Forwarded-Proto / -Host.
    public = status_callback_url("https://hooks.example.com/webhooks/twilio", "room-t", "m-2", elsewhere)
    params["MessageSid"] = "SM0123456789abcdef0123456789abcdee"
    body = urlencode(params).encode()
    proxied = {
        **form,
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Host": "hooks.example.com",
        "X-Twilio-Signature": _twilio_signature(public, params),
    }
    path = public.removeprefix("https://hooks.example.com")
    assert (await webhook.client.post(path, content=body, headers=proxied)).status_code == 200
