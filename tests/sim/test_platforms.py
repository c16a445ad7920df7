"""The simulator speaking Messenger, Instagram, Twilio and Telegram: each send route answers in its platform's
shape, Messenger's watermark deliveries cover several messages, Twilio calls back its status sequence signed over
the StatusCallback URL, Instagram calls back only reads, Telegram nothing; every delivery is in the receipt log."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl, urlencode

import aiohttp
import orjson
import pytest
from aiohttp import web

from inturn.platforms.base import CALLBACK_HEADER
from inturn.platforms.twilio import status_callback_url
from inturn.schemas import encode_callback_data, now_ms
from inturn_devtools.waiting import eventually
from inturn_sim.run import RunningSim, running_sim
from tests.sim.support import MetaAndTwilioHooks, meta_signed

SECRET, TOKEN, TWILIO_TOKEN = "test-app-secret", "test-token", "twilio-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


class Receiver(MetaAndTwilioHooks):
    """Takes every callback, checking Meta's or Twilio's signature independently of the simulator's code."""

    def __init__(self) -> None:
        super().__init__(SECRET, TOKEN, TWILIO_TOKEN, delivered_delay_ms=30)
        self.meta: list[dict[str, Any]] = []  # bodies of object page / instagram
        self.meta_at: list[int] = []  # when each arrived (ms)
        self.twilio: list[tuple[str, dict[str, str]]] = []  # (URL called, form)
        self.bad_signatures = 0

    async def meta_hook(self, request: web.Request) -> web.Response:
        raw = await request.read()
        if not meta_signed(request, raw, SECRET):
            self.bad_signatures += 1
            return web.Response(status=401)
        self.meta.append(orjson.loads(raw))
        self.meta_at.append(now_ms())
        return web.Response(text="ok")

    async def twilio_hook(self, request: web.Request) -> web.Response:
        params = sorted(parse_qsl((await request.read()).decode(), keep_blank_values=True))
        url = f"http://{request.host}{request.raw_path}"  # the target as sent, not re-encoded
        data = url + "".join(k + v for k, v in params)  # Twilio's documented scheme, written out
        expected = base64.b64encode(hmac.new(TWILIO_TOKEN.encode(), data.encode(), hashlib.sha1).digest()).decode()
        if request.headers.get("X-Twilio-Signature") != expected:
            self.bad_signatures += 1
            return web.Response(status=403)
        self.twilio.append((url, dict(params)))
        return web.Response(text="<Response/>", content_type="text/xml")

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [e for body in self.meta for entry in body["entry"] for e in entry["messaging"] if kind in e]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    hooks = Receiver()
    async with hooks.serving():
        yield hooks


async def _post(
    client: aiohttp.ClientSession, url: str, headers: dict[str, str], **kw: Any
) -> tuple[int, dict[str, Any]]:
    async with client.post(url, headers=headers, **kw) as response:
        return response.status, orjson.loads(await response.read())


async def _receipts(client: aiohttp.ClientSession, sim: RunningSim) -> list[dict[str, Any]]:
    async with client.get(f"{sim.url}/_sim/receipts") as response:
        receipts: list[dict[str, Any]] = orjson.loads(await response.read())["receipts"]
        return receipts


def _messenger_send(n: int, psid: str = "6543210") -> dict[str, Any]:
    return {"recipient": {"id": psid}, "messaging_type": "RESPONSE", "message": {"text": f"hello {n}"}}


def _routing(n: int) -> dict[str, str]:
    return {**BEARER, CALLBACK_HEADER: encode_callback_data("room-1", f"m{n}", 2)}


async def test_one_messenger_delivery_watermark_covers_several_messages_of_a_recipient(receiver: Receiver) -> None:
    async with (
        running_sim(receiver.sim_settings(messenger_mids_absent_rate=0)) as sim,
        aiohttp.ClientSession() as client,
    ):
        url = f"{sim.url}/messenger/v21.0/1122334455/messages"
        answers = [await _post(client, url, _routing(n), json=_messenger_send(n)) for n in range(3)]
        assert [status for status, _ in answers] == [200, 200, 200]
        assert {a["recipient_id"] for _, a in answers} == {"6543210"}
        mids = [a["message_id"] for _, a in answers]
        await eventually(lambda: sum(len(e["delivery"]["mids"]) for e in receiver.events("delivery")) == 3, 5, "3")
        deliveries = receiver.events("delivery")
        assert len(deliveries) < 3  # the three arrived within one delivered_delay: at least two share a callback
        assert [m for e in deliveries for m in e["delivery"]["mids"]] == mids
        receipts = await _receipts(client, sim)
        assert deliveries[-1]["delivery"]["watermark"] >= max(r["accepted_at_ms"] for r in receipts)
        assert all(e["sender"] == {"id": "6543210"} and e["recipient"] == {"id": "1122334455"} for e in deliveries)
        assert receiver.meta[0]["object"] == "page"
        assert [(r["room_id"], r["message_id"], r["wamid"]) for r in receipts] == [
            ("room-1", f"m{n}", mids[n]) for n in range(3)
        ]
        assert receiver.bad_signatures == 0


async def test_a_messenger_watermark_never_passes_a_message_still_on_its_way(receiver: Receiver) -> None:
    settings = receiver.sim_settings(messenger_mids_absent_rate=1, latency_median_ms=10, latency_p99_ms=600)
    async with running_sim(settings) as sim, aiohttp.ClientSession() as client:
        url = f"{sim.url}/messenger/v21.0/me/messages"
        for n in range(20):
            assert (await _post(client, url, BEARER, json=_messenger_send(n)))[0] == 200
        await eventually(lambda: sim.sim.stats.pending == 0 and not sim.sim._undelivered, 10, "all delivered")
        await eventually(lambda: bool(receiver.events("delivery")), 5, "a delivery callback")
        receipts = await _receipts(client, sim)
        assert len(receipts) == 20
        for body, arrived_at in zip(receiver.meta, receiver.meta_at, strict=True):
            for event in (e for entry in body["entry"] for e in entry["messaging"]):
                assert "mids" not in event["delivery"]
                watermark = event["delivery"]["watermark"]
                # every message accepted at or before the watermark was on the device when the callback came
                covered = [r for r in receipts if r["accepted_at_ms"] <= watermark]
                assert covered
                assert all(r["delivered_at_ms"] <= arrived_at for r in covered), watermark
        assert max(e["delivery"]["watermark"] for e in receiver.events("delivery")) == max(
            r["accepted_at_ms"] for r in receipts
        )


async def test_instagram_answers_with_the_message_id_and_calls_back_only_reads(receiver: Receiver) -> None:
    async with (
        running_sim(receiver.sim_settings(read_rate=1.0, read_delay_ms=5)) as sim,
        aiohttp.ClientSession() as client,
    ):
        url = f"{sim.url}/instagram/v21.0/17841400000000000/messages"
        status, answer = await _post(client, url, _routing(0), json=_messenger_send(0, psid="IGSID"))
        assert status == 200
        assert answer["recipient_id"] == "IGSID"
        receipts = await _receipts(client, sim)  # in the conversation as soon as the answer says so
        assert [(r["wamid"], r["room_id"], r["message_id"]) for r in receipts] == [
            (answer["message_id"], "room-1", "m0")
        ]
        await eventually(lambda: bool(receiver.events("read")), 5, "messaging_seen")
        [seen] = receiver.events("read")
        assert seen["read"] == {"mid": answer["message_id"]}
        assert (seen["sender"], seen["recipient"]) == ({"id": "IGSID"}, {"id": "17841400000000000"})
        assert receiver.meta[0]["object"] == "instagram"
        assert not receiver.events("delivery")


async def test_a_send_api_body_without_a_recipient_or_a_wrong_token_is_refused(receiver: Receiver) -> None:
    async with running_sim(receiver.sim_settings()) as sim, aiohttp.ClientSession() as client:
        url = f"{sim.url}/messenger/v21.0/me/messages"
        status, answer = await _post(client, url, BEARER, json={"message": {"text": "x"}})
        assert (status, answer["error"]["code"]) == (400, 100)
        status, answer = await _post(client, url, {"Authorization": "Bearer nope"}, json=_messenger_send(0))
        assert (status, answer["error"]["code"]) == (401, 190)


def _twilio_auth(password: str = TWILIO_TOKEN) -> dict[str, str]:
    credentials = base64.b64encode(f"AC1:{password}".encode()).decode()
    return {"Authorization": f"Basic {credentials}"}


async def test_twilio_calls_back_sent_delivered_read_signed_over_the_status_callback_url(receiver: Receiver) -> None:
    async with (
        running_sim(receiver.sim_settings(read_rate=1.0, read_delay_ms=5)) as sim,
        aiohttp.ClientSession() as client,
    ):
        callback = status_callback_url(f"{receiver.base}/webhooks/twilio", "room-1", "m0", 4)
        form = {"To": "+4917000001", "From": "+15005550006", "Body": "hello", "StatusCallback": callback}
        url = f"{sim.url}/twilio/2010-04-01/Accounts/AC1/Messages.json"
        status, answer = await _post(client, url, _twilio_auth(), data=form)
        assert status == 201
        assert (answer["status"], answer["to"], answer["account_sid"]) == ("queued", "+4917000001", "AC1")
        assert answer["sid"].startswith("SM")
        assert len(answer["sid"]) == 34
        await eventually(lambda: len(receiver.twilio) == 3, 5, "sent, delivered, read")
        assert [form["MessageStatus"] for _, form in receiver.twilio] == ["sent", "delivered", "read"]
        assert {(f["From"], f["To"], f["AccountSid"]) for _, f in receiver.twilio} == {
            ("+15005550006", "+4917000001", "AC1")
        }
        assert {called for called, _ in receiver.twilio} == {callback}
        assert {f["MessageSid"] for _, f in receiver.twilio} == {answer["sid"]}
        assert receiver.bad_signatures == 0
        [receipt] = await _receipts(client, sim)
        assert (receipt["room_id"], receipt["message_id"], receipt["wamid"]) == ("room-1", "m0", answer["sid"])


async def test_a_twilio_messaging_service_message_is_called_back_queued_first(receiver: Receiver) -> None:
    async with running_sim(receiver.sim_settings()) as sim, aiohttp.ClientSession() as client:
        callback = f"{receiver.base}/webhooks/twilio?x=1"
        form = {"To": "+4917000001", "MessagingServiceSid": "MG1", "Body": "hi", "StatusCallback": callback}
        url = f"{sim.url}/twilio/2010-04-01/Accounts/AC1/Messages.json"
        status, answer = await _post(client, url, _twilio_auth(), data=form)
        assert (status, answer["status"]) == (201, "accepted")
        await eventually(lambda: len(receiver.twilio) == 3, 5, "queued, sent, delivered")
        assert [f["MessageStatus"] for _, f in receiver.twilio] == ["queued", "sent", "delivered"]


async def test_twilio_refuses_a_wrong_password_and_a_form_without_a_sender(receiver: Receiver) -> None:
    async with running_sim(receiver.sim_settings()) as sim, aiohttp.ClientSession() as client:
        url = f"{sim.url}/twilio/2010-04-01/Accounts/AC1/Messages.json"
        status, answer = await _post(client, url, _twilio_auth("wrong"), data={"To": "+1", "From": "+2", "Body": "x"})
        assert (status, answer["code"]) == (401, 20003)
        status, answer = await _post(client, url, _twilio_auth(), data={"To": "+1", "Body": "x"})
        assert (status, answer["code"]) == (400, 21211)


async def test_a_failed_twilio_message_is_called_back_undelivered_with_its_error_code(receiver: Receiver) -> None:
    async with running_sim(receiver.sim_settings(failed_rate=1.0)) as sim, aiohttp.ClientSession() as client:
        form = {"To": "+1", "From": "+2", "Body": "x", "StatusCallback": f"{receiver.base}/webhooks/twilio"}
        url = f"{sim.url}/twilio/2010-04-01/Accounts/AC1/Messages.json"
        assert (await _post(client, url, _twilio_auth(), data=form))[0] == 201
        await eventually(lambda: len(receiver.twilio) == 1, 5, "undelivered")
        assert (receiver.twilio[0][1]["MessageStatus"], receiver.twilio[0][1]["ErrorCode"]) == ("undelivered", "30003")
        assert await _receipts(client, sim) == []


async def test_telegram_answers_ok_with_per_chat_message_ids_and_calls_nothing_back(receiver: Receiver) -> None:
    async with running_sim(receiver.sim_settings()) as sim, aiohttp.ClientSession() as client:
        url = f"{sim.url}/telegram/bot{TOKEN}/sendMessage"
        answers = []
        for n, chat in enumerate([111, 111, -100222]):
            headers = {CALLBACK_HEADER: encode_callback_data("room-t", f"m{n}")}
            answers.append(await _post(client, url, headers, json={"chat_id": chat, "text": f"t{n}"}))
        assert [(s, a["ok"], a["result"]["message_id"], a["result"]["chat"]["id"]) for s, a in answers] == [
            (200, True, 1, 111),
            (200, True, 2, 111),
            (200, True, 1, -100222),
        ]
        receipts = await _receipts(client, sim)
        assert [(r["recipient"], r["message_id"]) for r in receipts] == [
            ("111", "m0"),
            ("111", "m1"),
            ("-100222", "m2"),
        ]
        assert sim.sim.stats.callbacks_sent == 0
        assert receiver.meta == []
        assert receiver.twilio == []


async def test_telegram_flood_control_answers_429_with_retry_after_and_a_bad_token_401(receiver: Receiver) -> None:
    async with running_sim(receiver.sim_settings()) as sim, aiohttp.ClientSession() as client:
        async with client.post(f"{sim.url}/_sim/faults", json={"status": 429, "count": 1, "retry_after": 3}) as r:
            assert r.status == 200
        url = f"{sim.url}/telegram/bot{TOKEN}/sendMessage"
        status, answer = await _post(client, url, {}, data=urlencode({"chat_id": "5", "text": "x"}).encode(),
                                     )  # fmt: skip
        assert (status, answer["ok"], answer["error_code"], answer["parameters"]) == (
            429,
            False,
            429,
            {"retry_after": 3},
        )
        status, answer = await _post(client, f"{sim.url}/telegram/botWRONG/sendMessage", {}, json={"chat_id": 5})
        assert (status, answer["error_code"]) == (401, 401)
        assert await _receipts(client, sim) == []
