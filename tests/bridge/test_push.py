"""Push mode over real HTTP with real Pub/Sub push envelopes, and the optional OIDC check of push tokens."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from google.auth import crypt

from inturn.schemas import DeadLetter, Message, decode, encode
from inturn.settings import KafkaSettings
from inturn.settings.bridge import BridgeSettings
from inturn_bridge.service import BridgeService
from inturn_devtools.reading import TopicReader
from tests.bridge.conftest import workload
from tests.bridge.oidc_issuer import AUDIENCE, PUSHER, certificate_server, signing_key, token

pytestmark = pytest.mark.kafka


def envelope(data: bytes, pubsub_id: str, ordering_key: str = "", **attributes: str) -> bytes:
    """A push envelope as Pub/Sub sends it."""
    message = {
        "data": base64.b64encode(data).decode(),
        "attributes": attributes,
        "messageId": pubsub_id,
        "message_id": pubsub_id,
        "publishTime": "2026-11-22T10:00:00.5Z",
        "orderingKey": ordering_key,
    }
    return orjson.dumps({"message": message, "subscription": "projects/inturn-test/subscriptions/push"})


@pytest.fixture
async def push_bridge(ready_topics: KafkaSettings) -> AsyncIterator[BridgeService]:
    """A push-mode bridge on a free port."""
    settings = BridgeSettings(
        **ready_topics.model_dump(), bridge_mode="push", bridge_http_port=0, bridge_internal_port=0
    )
    bridge = BridgeService(settings)
    await bridge.start()
    yield bridge
    await bridge.stop()


async def post(port: int, body: bytes, token: str | None = None) -> tuple[int, dict[str, Any]]:
    """POST ``body`` to the push endpoint; (status, JSON answer)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://127.0.0.1:{port}/push", data=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json()


async def test_push_answers_200_once_written_200_for_a_redelivery_202_for_poison_and_400_for_non_envelopes(
    push_bridge: BridgeService, ready_topics: KafkaSettings, test_id: str
) -> None:
    (message,) = workload(rooms=1, per_room=1, run_id=test_id)
    written = await post(push_bridge.port, envelope(encode(message), "77", ordering_key=message.room_id))
    # Kafka has it at the partition and offset the answer names, the moment the answer arrives.
    reader = TopicReader(ready_topics, ready_topics.topic_messages)
    record = reader.until(lambda r: len(r) >= 1, 10, "the written message")[0]
    again = await post(push_bridge.port, envelope(encode(message), "77", ordering_key=message.room_id))
    poison = await post(push_bridge.port, envelope(b"{not a message", "78", ordering_key=message.room_id))
    no_room = await post(push_bridge.port, envelope(encode(message), "79"))
    not_json = await post(push_bridge.port, b"<html>")
    no_id = await post(push_bridge.port, orjson.dumps({"message": {"data": ""}}))
    dlq = TopicReader(ready_topics, ready_topics.topic_dlq)
    letters = [decode(DeadLetter, r.value) for r in dlq.until(lambda r: len(r) >= 2, 10, "two dead letters")]
    reader.poll(0.5)
    reader.close()
    dlq.close()
    assert written == (200, {"status": "written", "partition": record.partition, "offset": record.offset})
    stored = decode(Message, record.value)
    assert stored.message_id == message.message_id
    assert stored.attributes["pubsub_message_id"] == "77"
    assert again == (200, {"status": "duplicate"})
    assert len(reader.records) == 1
    assert poison[0] == 202
    assert poison[1]["status"] == "dead_lettered"
    assert no_room[0] == 202
    assert no_room[1]["reason"].startswith("no room")
    assert sorted((dl.message_id, dl.reason.split(":")[0]) for dl in letters) == [
        ("78", "undecodable"),
        ("79", "no_room"),
    ]
    assert next(dl for dl in letters if dl.message_id == "78").raw() == b"{not a message"
    assert not_json[0] == 400
    assert no_id == (400, {"status": "rejected", "reason": "message.messageId is missing"})


# --- OIDC -------------------------------------------------------------------------------------------
# A token signed by Google cannot be made offline: tests.bridge.oidc_issuer signs with a key of its own and serves
# its certificate the way Google serves its own, so everything but Google's key is real.


@pytest.fixture
async def certs_url() -> AsyncIterator[tuple[str, crypt.RSASigner]]:
    """A local stand-in for Google's certificate endpoint, and the signer whose certificate it serves."""
    async with certificate_server() as served:
        yield served


async def test_with_oidc_configured_push_requests_need_a_valid_token_for_the_audience_issuer_and_email(
    ready_topics: KafkaSettings, certs_url: tuple[str, crypt.RSASigner], test_id: str
) -> None:
    url, signer = certs_url
    settings = BridgeSettings(
        **ready_topics.model_dump(),
        bridge_mode="push",
        bridge_http_port=0,
        bridge_internal_port=0,
        bridge_oidc_audience=AUDIENCE,
        bridge_oidc_certs_url=url,
        bridge_oidc_email=PUSHER,
    )
    bridge = BridgeService(settings)
    await bridge.start()
    (message,) = workload(rooms=1, per_room=1, run_id=test_id)
    body = envelope(encode(message), "501", ordering_key=message.room_id)
    stranger, _ = signing_key("kid-1")
    try:
        missing = await post(bridge.port, body)
        garbage = await post(bridge.port, body, "not.a.jwt")
        forged = await post(bridge.port, body, token(stranger))
        wrong_audience = await post(bridge.port, body, token(signer, aud="https://elsewhere.example.com"))
        expired = await post(bridge.port, body, token(signer, iat=int(time.time()) - 7200, exp=int(time.time()) - 3600))
        wrong_issuer = await post(bridge.port, body, token(signer, iss="https://issuer.example.com"))
        wrong_email = await post(bridge.port, body, token(signer, email="someone@example.com"))
        valid = await post(bridge.port, body, token(signer))
    finally:
        await bridge.stop()
    assert missing == (401, {"status": "rejected", "reason": "missing bearer token"})
    for status, answer in (garbage, forged, wrong_audience, expired):
        assert status == 401, answer
        assert answer["reason"].startswith("invalid token")
    # A well-signed token of another issuer or service account proves nothing either: 401, like the rest.
    assert wrong_issuer[0] == 401
    assert wrong_email == (
        401,
        {
            "status": "rejected",
            "reason": "token email 'someone@example.com' is not 'pusher@inturn-test.iam.gserviceaccount.com', "
            "or not verified",
        },
    )
    assert valid[0] == 200
    assert valid[1]["status"] == "written"
