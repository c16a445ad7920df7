"""The adapters, the simulator and the webhook's parsers agree: each adapter's send is accepted by the simulator
speaking its platform, and the callbacks it sends back pass the webhook's signature checks and parse into statuses
that route to the sending room (Twilio) or resolve the in-flight send by watermark (Messenger)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from inturn.platforms import (
    InstagramAdapter,
    MessengerAdapter,
    SendResult,
    TelegramAdapter,
    TwilioAdapter,
    watermark_covers,
)
from inturn.schemas import Message, now_ms
from inturn.settings.worker import PlatformSettings
from inturn_devtools.waiting import eventually
from inturn_sim.run import running_sim
from inturn_webhook.platforms import form_params, parse_messenger, parse_twilio, public_url, verify_twilio
from inturn_webhook.rooms import RoomResolver
from inturn_webhook.signature import verify
from inturn_webhook.statuses import Status
from tests.sim.support import MetaAndTwilioHooks
from tests.support.messages import text_message

SECRET, TOKEN, TWILIO_TOKEN = "contract-secret", "contract-token", "contract-twilio"


class Webhook(MetaAndTwilioHooks):
    """The webhook's pure functions behind two bare routes (the real routes are the webhook service's)."""

    def __init__(self) -> None:
        super().__init__(SECRET, TOKEN, TWILIO_TOKEN, delivered_delay_ms=80)
        self.statuses: list[Status] = []
        self.refused = 0

    async def meta_hook(self, request: web.Request) -> web.Response:
        body = await request.read()
        verify(request.headers.get("X-Hub-Signature-256"), body, [SECRET.encode()])
        rooms = RoomResolver("room-of-{recipient}")
        if b'"object":"page"' in body:
            callback = parse_messenger(body, rooms, "messenger")
        else:
            callback = parse_messenger(body, rooms, "instagram")
        assert not callback.rejected
        self.statuses.extend(callback.statuses)
        return web.Response(text="ok")

    async def twilio_hook(self, request: web.Request) -> web.Response:
        body = await request.read()
        url = public_url(request.raw_path, scheme=request.scheme, host=request.host)
        params = form_params(body)
        verify_twilio(request.headers.get("X-Twilio-Signature"), url, params, [TWILIO_TOKEN.encode()])
        self.statuses.extend(parse_twilio(body, url, RoomResolver(None), now_ms()).statuses)
        return web.Response(text="<Response/>", content_type="text/xml")


@pytest.fixture
async def webhook() -> AsyncIterator[Webhook]:
    hooks = Webhook()
    async with hooks.serving():
        yield hooks


def _platform_settings(sim_url: str, webhook: Webhook) -> PlatformSettings:
    return PlatformSettings(
        messenger_base_url=f"{sim_url}/messenger",
        messenger_page_id="1122334455",
        messenger_page_access_token=TOKEN,
        instagram_base_url=f"{sim_url}/instagram",
        instagram_access_token=TOKEN,
        twilio_base_url=f"{sim_url}/twilio",
        twilio_account_sid="AC1",
        twilio_auth_token=TWILIO_TOKEN,
        twilio_from="+15005550006",
        twilio_status_callback_url=f"{webhook.base}/webhooks/twilio",
        telegram_base_url=f"{sim_url}/telegram",
        telegram_bot_token=TOKEN,
        platform_callback_header=True,
    )


def _message(platform: str, n: int, recipient: str) -> Message:
    return text_message(
        "room-A",
        f"m{n}",
        platform=platform,
        recipient=recipient,
        body=f"hello {n}",
    )


async def test_twilio_statuses_route_to_the_sending_room_and_partition(webhook: Webhook) -> None:
    async with running_sim(webhook.sim_settings()) as sim:
        adapter = TwilioAdapter(_platform_settings(sim.url, webhook), 2, 5.0)
        try:
            result = await adapter.send(adapter.prepare(_message("twilio", 1, "+4917000001"), partition=3))
        finally:
            await adapter.close()
        await eventually(lambda: len(webhook.statuses) == 2, 5, "sent and delivered")
    assert [(s.platform_message_id, s.status) for s in webhook.statuses] == [
        (result.platform_message_id, "sent"),
        (result.platform_message_id, "delivered"),
    ]
    assert {(s.room_id, s.message_id, s.partition) for s in webhook.statuses} == {("room-A", "m1", 3)}


async def test_one_messenger_watermark_resolves_three_sends_of_a_room_and_not_a_later_one(webhook: Webhook) -> None:
    async with running_sim(webhook.sim_settings(messenger_mids_absent_rate=1.0)) as sim:
        adapter = MessengerAdapter(_platform_settings(sim.url, webhook), 2, 5.0)
        try:
            results = [await adapter.send(adapter.prepare(_message("messenger", n, "6543210"))) for n in range(3)]
            await eventually(lambda: len(webhook.statuses) == 1, 5, "one delivery callback")
            later = await adapter.send(adapter.prepare(_message("messenger", 3, "6543210")))
        finally:
            await adapter.close()
    [status] = webhook.statuses[:1]
    assert (status.status, status.room_id, status.recipient) == ("delivered", "room-of-6543210", "6543210")
    assert status.watermark_ms is not None
    assert all(watermark_covers(result, status.watermark_ms) for result in results)
    assert not watermark_covers(later, status.watermark_ms)  # a watermark older than the send resolves nothing


async def test_synchronous_platforms_answer_with_the_message_id(webhook: Webhook) -> None:
    async with running_sim(webhook.sim_settings(read_rate=1.0, read_delay_ms=5)) as sim:
        settings = _platform_settings(sim.url, webhook)
        results: list[SendResult] = []
        for cls, recipient in ((TelegramAdapter, "777"), (InstagramAdapter, "IGSID")):
            adapter = cls(settings, 2, 5.0)
            try:
                results.append(await adapter.send(adapter.prepare(_message(cls.name, 0, recipient))))
            finally:
                await adapter.close()
        await eventually(lambda: len(webhook.statuses) == 1, 5, "Instagram's messaging_seen")
        receipts = sim.sim.receipts.since(0)
    assert results[0].platform_message_id == "777:1"
    [seen] = webhook.statuses
    assert (seen.platform_message_id, seen.status, seen.room_id) == (
        results[1].platform_message_id,
        "read",
        "room-of-IGSID",
    )
    assert [(r["room_id"], r["message_id"]) for r in receipts] == [("room-A", "m0"), ("room-A", "m0")]
