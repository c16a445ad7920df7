"""The webhook against a real broker: what is published where, and what every kind of bad input is answered."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest
from prometheus_client import REGISTRY

from inturn import schemas
from inturn.kafka import make_producer, partition_for
from inturn.schemas import Ack, AckStatus, DeadLetter, Message
from inturn.settings import KafkaSettings
from inturn.settings.webhook import WebhookSettings
from inturn_devtools.process import free_port
from inturn_devtools.waiting import eventually
from inturn_webhook.signature import sign

from .support import (
    APP_SECRET,
    GENERIC_SECRET,
    MAX_BODY,
    PREVIOUS_APP_SECRET,
    VERIFY_TOKEN,
    Webhook,
    meta_payload,
    meta_status,
    read_topic,
    record_count,
    started,
    webhook_settings_for,
)

pytestmark = pytest.mark.kafka

ROOMS = [f"room-{i}" for i in range(8)]


def _nothing_published(settings: WebhookSettings) -> None:
    assert record_count(settings, settings.topic_acks) == 0
    assert record_count(settings, settings.topic_dlq) == 0


async def test_a_signed_multi_status_payload_becomes_acks_on_each_rooms_partition(webhook: Webhook) -> None:
    settings = webhook.settings
    statuses = [meta_status(f"wamid.{i}", "sent", room=room, message=f"m{i}") for i, room in enumerate(ROOMS)]
    statuses.append(
        meta_status(
            "wamid.f", "failed", room="room-0", message="m0", errors=[{"code": 131047, "title": "Re-engagement"}]
        )
    )
    statuses.append(meta_status("wamid.r", "delivered", recipient="4917"))  # no callback data: room from recipient

    response = await webhook.post_meta(meta_payload(*statuses))

    assert response.status_code == 200, response.text
    assert response.json()["published"] == len(statuses)
    acks = read_topic(settings, settings.topic_acks, len(statuses))
    by_id = {}
    for key, partition, value in acks:
        ack = schemas.decode(Ack, value)
        assert key == ack.room_id
        assert partition == partition_for(ack.room_id, 4)
        by_id[ack.platform_message_id] = ack
    assert by_id["wamid.3"].message_id == "m3"
    assert by_id["wamid.3"].platform_ts_ms == 1_700_000_000_123
    assert by_id["wamid.f"].status is AckStatus.FAILED
    assert by_id["wamid.f"].error == "131047: Re-engagement"
    assert (by_id["wamid.r"].room_id, by_id["wamid.r"].message_id) == ("wa:4917", None)
    assert record_count(settings, settings.topic_dlq) == 0

    # A real message produced with the same key lands on the same partition as its room's acks.
    producer = make_producer(settings)
    for room in ROOMS:
        message = Message(room_id=room, message_id="x", platform="whatsapp", recipient="1", payload={}, created_at_ms=1)
        producer.produce(settings.topic_messages, key=room.encode(), value=schemas.encode(message))
    assert producer.flush(15) == 0
    message_partitions = {key: partition for key, partition, _ in read_topic(settings, settings.topic_messages, 8)}
    ack_partitions = {key: partition for key, partition, _ in acks}
    assert message_partitions == {room: ack_partitions[room] for room in ROOMS}


async def test_an_ack_goes_to_the_partition_named_in_the_callback_data_not_the_rooms_hash(webhook: Webhook) -> None:
    settings = webhook.settings
    # For each room, a partition other than murmur2(room): what a producer with another partitioner chose.
    elsewhere = {room: (partition_for(room, 4) + 1) % 4 for room in ROOMS[:4]}
    statuses = [meta_status(f"wamid.{room}", room=room, message="m") for room in elsewhere]
    for status, (room, partition) in zip(statuses, elsewhere.items(), strict=True):
        status["biz_opaque_callback_data"] = schemas.encode_callback_data(room, "m", partition)
    # A partition the acks topic does not have (4 partitions): routed by the room instead.
    statuses.append(meta_status("wamid.far", room="room-far", message="m"))
    statuses[-1]["biz_opaque_callback_data"] = schemas.encode_callback_data("room-far", "m", 9)
    await webhook.ready()

    response = await webhook.post_meta(meta_payload(*statuses))

    assert (response.status_code, response.json()["published"]) == (200, 5), response.text
    placed = {key: partition for key, partition, _ in read_topic(settings, settings.topic_acks, 5)}
    assert placed == {**elsewhere, "room-far": partition_for("room-far", 4)}
    generic = orjson.dumps(
        {
            "acks": [
                {
                    "room_id": "room-0",
                    "platform_message_id": "g.1",
                    "status": "sent",
                    "timestamp_ms": 5,
                    "partition": elsewhere["room-0"],
                }
            ]
        }
    )
    signed = {"X-Inturn-Signature-256": sign(generic, GENERIC_SECRET.encode())}
    assert (await webhook.client.post("/webhooks/generic/acme", content=generic, headers=signed)).status_code == 200
    room_0 = [
        (partition, schemas.decode(Ack, value))
        for key, partition, value in read_topic(settings, settings.topic_acks, 6)
        if key == "room-0"
    ]
    assert sorted((ack.platform, partition) for partition, ack in room_0) == [
        ("acme", elsewhere["room-0"]),
        ("whatsapp", elsewhere["room-0"]),
    ]


async def test_a_bad_signature_is_answered_401_and_nothing_is_published(webhook: Webhook) -> None:
    body = orjson.dumps(meta_payload(meta_status("wamid.1", room="r", message="m")))
    variants = {
        "missing header": {},
        "malformed header: wrong scheme": {"X-Hub-Signature-256": "md5=abc"},
        "malformed header: not hex": {"X-Hub-Signature-256": "sha256=xyz"},
        "malformed header: too short": {"X-Hub-Signature-256": "sha256=abcd"},
        "wrong signature": {"X-Hub-Signature-256": "sha256=" + "0" * 64},
        "signed with a secret we do not hold": {"X-Hub-Signature-256": sign(body, b"wrong-secret")},
        "signed over other bytes": {"X-Hub-Signature-256": sign(body + b" ", APP_SECRET.encode())},
    }
    for why, headers in variants.items():
        response = await webhook.client.post("/webhooks/whatsapp", content=body, headers=headers)
        assert response.status_code == 401, why
        assert "detail" in response.json(), why
    # All of them answered: had any been published, Kafka would hold it by now.
    _nothing_published(webhook.settings)


async def test_unsigned_junk_is_refused_401_before_parsing(webhook: Webhook) -> None:
    response = await webhook.client.post("/webhooks/whatsapp", content=b"\xff\x00not json at all")
    assert response.status_code == 401
    _nothing_published(webhook.settings)


async def test_a_callback_signed_with_the_previous_secret_is_accepted_during_rotation(webhook: Webhook) -> None:
    response = await webhook.post_meta(
        meta_payload(meta_status("wamid.old", room="r", message="m")), secret=PREVIOUS_APP_SECRET
    )
    assert response.status_code == 200
    assert record_count(webhook.settings, webhook.settings.topic_acks) == 1


async def test_an_oversized_body_with_content_length_is_answered_413(webhook: Webhook) -> None:
    body = b"x" * (MAX_BODY + 1)
    response = await webhook.client.post(
        "/webhooks/whatsapp", content=body, headers={"X-Hub-Signature-256": sign(body, APP_SECRET.encode())}
    )
    assert response.status_code == 413
    _nothing_published(webhook.settings)


async def test_an_oversized_chunked_body_is_answered_413_and_read_no_further_than_the_limit(
    webhook: Webhook,
) -> None:
    chunk = b"y" * 4096
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        for _ in range(10_000):  # 40 MB if nobody stopped reading
            pulled += 1
            yield chunk

    response = await webhook.client.post(
        "/webhooks/whatsapp", content=endless(), headers={"X-Hub-Signature-256": "sha256=" + "a" * 64}
    )
    assert response.status_code == 413
    assert "content-length" not in response.request.headers
    assert pulled <= MAX_BODY // len(chunk) + 2
    _nothing_published(webhook.settings)


async def test_signed_malformed_json_goes_whole_to_the_dead_letter_topic_and_is_answered_200(
    webhook: Webhook,
) -> None:
    body = b'{"entry": [ this is not json'
    response = await webhook.client.post(
        "/webhooks/whatsapp", content=body, headers={"X-Hub-Signature-256": sign(body, APP_SECRET.encode())}
    )
    assert response.status_code == 200
    assert response.json()["dead_lettered"] == 1
    assert response.json()["reason"].startswith("invalid JSON")
    [(_, _, value)] = read_topic(webhook.settings, webhook.settings.topic_dlq, 1)
    letter = schemas.decode(DeadLetter, value)
    assert (letter.source, letter.raw()) == ("webhook", body)
    assert record_count(webhook.settings, webhook.settings.topic_acks) == 0


async def test_a_signed_body_of_the_wrong_shape_is_dead_lettered_with_the_reason(webhook: Webhook) -> None:
    response = await webhook.post_meta({"entry": [{"changes": "nope"}]})
    assert response.status_code == 200
    [(_, _, value)] = read_topic(webhook.settings, webhook.settings.topic_dlq, 1)
    assert schemas.decode(DeadLetter, value).reason == "entry[0].changes: not a list"


async def test_a_status_for_no_known_room_goes_to_the_dead_letter_topic_never_to_acks(
    inturn_topics: KafkaSettings,
) -> None:
    settings = webhook_settings_for(inturn_topics, webhook_room_from_recipient=None)
    counted = REGISTRY.get_sample_value(
        "inturn_webhook_statuses_total", {"platform": "whatsapp", "status": "read", "outcome": "unknown_room"}
    )
    async with started(settings) as webhook:
        response = await webhook.post_meta(meta_payload(meta_status("wamid.lost", "read", recipient="999")))
    assert response.status_code == 200
    assert response.json()["unknown_room"] == 1
    [(_, _, value)] = read_topic(settings, settings.topic_dlq, 1)
    letter = schemas.decode(DeadLetter, value)
    assert letter.reason == "unknown room"
    assert orjson.loads(letter.raw())["id"] == "wamid.lost"
    assert record_count(settings, settings.topic_acks) == 0
    after = REGISTRY.get_sample_value(
        "inturn_webhook_statuses_total", {"platform": "whatsapp", "status": "read", "outcome": "unknown_room"}
    )
    assert after == (counted or 0) + 1


async def test_a_replayed_status_is_answered_200_and_not_published_twice(webhook: Webhook) -> None:
    payload = meta_payload(
        meta_status("wamid.1", "sent", room="r1", message="m1"),
        meta_status("wamid.1", "delivered", room="r1", message="m1"),
    )
    first = await webhook.post_meta(payload)
    again = await webhook.post_meta(payload)
    assert (first.status_code, first.json()["published"]) == (200, 2)
    assert (again.status_code, again.json()["published"], again.json()["replayed"]) == (200, 0, 2)
    assert record_count(webhook.settings, webhook.settings.topic_acks) == 2


async def test_a_status_repeated_within_one_callback_is_published_once(webhook: Webhook) -> None:
    twice = meta_status("wamid.2", "read", room="r2", message="m2")
    response = await webhook.post_meta(meta_payload(twice, twice))
    assert (response.status_code, response.json()["published"], response.json()["replayed"]) == (200, 1, 1)
    assert record_count(webhook.settings, webhook.settings.topic_acks) == 1


async def test_one_unreadable_status_is_dead_lettered_alone_and_the_others_are_published(webhook: Webhook) -> None:
    payload = meta_payload(
        meta_status("wamid.ok", "sent", room="r1", message="m1"),
        meta_status("wamid.bad", "deleted", room="r1", message="m2"),
        meta_status("wamid.ts", "sent", room="r1", message="m3", timestamp="yesterday"),
    )
    response = await webhook.post_meta(payload)
    assert (response.status_code, response.json()["published"], response.json()["dead_lettered"]) == (200, 1, 2)
    reasons = sorted(
        schemas.decode(DeadLetter, v).reason for _, _, v in read_topic(webhook.settings, webhook.settings.topic_dlq, 2)
    )
    assert reasons == [
        "invalid status: status: unsupported value 'deleted'",
        "invalid status: timestamp: not unix seconds",
    ]
    assert record_count(webhook.settings, webhook.settings.topic_acks) == 1


async def test_incoming_messages_are_acknowledged_and_ignored(webhook: Webhook) -> None:
    response = await webhook.post_meta(meta_payload(messages=[{"from": "4917", "id": "wamid.in", "type": "text"}]))
    assert (response.status_code, response.json()["ignored"]) == (200, 1)
    _nothing_published(webhook.settings)


async def test_the_generic_endpoint_publishes_signed_acks_with_the_platform_from_the_path(webhook: Webhook) -> None:
    body = orjson.dumps(
        {"acks": [{"room_id": "room-g", "platform_message_id": "ig.1", "status": "read", "timestamp_ms": 5}]}
    )
    signed = {"X-Inturn-Signature-256": sign(body, GENERIC_SECRET.encode())}
    wrong = {"X-Inturn-Signature-256": sign(body, APP_SECRET.encode())}

    assert (await webhook.client.post("/webhooks/generic/instagram", content=body, headers=wrong)).status_code == 401
    response = await webhook.client.post("/webhooks/generic/instagram", content=body, headers=signed)

    assert response.status_code == 200
    [(key, partition, value)] = read_topic(webhook.settings, webhook.settings.topic_acks, 1)
    ack = schemas.decode(Ack, value)
    assert (key, partition, ack.platform, ack.platform_ts_ms, ack.message_id) == (
        "room-g",
        partition_for("room-g", 4),
        "instagram",
        5,
        None,
    )


async def test_the_generic_endpoint_dead_letters_a_platform_name_acks_could_not_carry(webhook: Webhook) -> None:
    body = b'{"acks": []}'
    headers = {"X-Inturn-Signature-256": sign(body, GENERIC_SECRET.encode())}
    response = await webhook.client.post("/webhooks/generic/Not%20A%20Name", content=body, headers=headers)
    assert response.status_code == 200
    [(_, _, value)] = read_topic(webhook.settings, webhook.settings.topic_dlq, 1)
    assert schemas.decode(DeadLetter, value).reason.startswith("invalid platform name")


async def test_the_verification_handshake_echoes_the_challenge_only_for_the_right_token(webhook: Webhook) -> None:
    query = {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "1158201444"}
    ok = await webhook.client.get("/webhooks/whatsapp", params=query)
    assert (ok.status_code, ok.text, ok.headers["content-type"].split(";")[0]) == (200, "1158201444", "text/plain")
    wrong = await webhook.client.get("/webhooks/whatsapp", params={**query, "hub.verify_token": "guess"})
    assert wrong.status_code == 403
    assert (await webhook.client.get("/webhooks/whatsapp")).status_code == 403


async def test_probes_and_metrics_answer(webhook: Webhook) -> None:
    assert (await webhook.internal.get("/healthz")).status_code == 200
    assert "inturn_webhook_requests_total" in (await webhook.internal.get("/metrics")).text


async def test_when_kafka_does_not_confirm_the_answer_is_503_and_the_process_is_not_ready(
    inturn_topics: KafkaSettings,
) -> None:
    settings = webhook_settings_for(
        inturn_topics,
        kafka_bootstrap=f"127.0.0.1:{free_port()}",  # nothing listens there
        webhook_kafka_confirm_timeout_ms=300,
        webhook_kafka_message_timeout_ms=1000,
    )
    async with started(settings) as webhook:
        response = await webhook.post_meta(meta_payload(meta_status("wamid.1", room="r", message="m")))
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        ready = await webhook.internal.get("/readyz")
        assert ready.status_code == 503
    assert record_count(inturn_topics, inturn_topics.topic_acks) == 0


async def test_when_the_producer_queue_stays_full_the_answer_is_503_and_the_webhook_goes_on(
    inturn_topics: KafkaSettings,
) -> None:
    """Kafka away long enough that librdkafka's local queue fills: ``produce`` raises ``BufferError``, which the
    webhook must answer 503 (the platform retries), not let out as a 500 or a crash."""
    settings = webhook_settings_for(
        inturn_topics,
        kafka_bootstrap=f"127.0.0.1:{free_port()}",  # nothing listens there: the queued record stays queued
        kafka_client_config={"queue.buffering.max.messages": "1"},
        webhook_kafka_confirm_timeout_ms=300,
    )
    async with started(settings) as webhook:
        two = meta_payload(
            meta_status("wamid.1", room="r", message="m1"), meta_status("wamid.2", room="r", message="m2")
        )
        response = await webhook.post_meta(
            two
        )  # the first status takes the queue's one place, the second finds it full
        assert response.status_code == 503
        assert response.json() == {"detail": "producer queue full"}
        assert response.headers["retry-after"] == "1"
        again = await webhook.post_meta(meta_payload(meta_status("wamid.3", room="r", message="m3")))
        assert again.status_code == 503
        assert (await webhook.internal.get("/healthz")).status_code == 200


async def test_the_webhook_is_ready_once_kafka_answered(webhook: Webhook) -> None:
    async def ready() -> bool:
        return (await webhook.internal.get("/readyz")).status_code == 200

    await eventually(ready, 10, "/readyz answering 200")
