"""Pull mode against the real Pub/Sub emulator and real Kafka: order, completeness, partitions, poison."""

from __future__ import annotations

import aiohttp
import pytest

from inturn.kafka import partition_for
from inturn.schemas import DeadLetter, Message, decode, encode
from inturn.settings import KafkaSettings
from inturn_bridge.service import BridgeService
from inturn_devtools.reading import TopicReader
from tests.bridge.conftest import Ordered, bridge_settings, per_room_seqs, workload

pytestmark = [pytest.mark.kafka, pytest.mark.pubsub]


async def test_messages_of_50_rooms_reach_kafka_all_in_room_order_on_their_rooms_partition(
    ready_topics: KafkaSettings, ordered: Ordered, test_id: str
) -> None:
    settings = bridge_settings(ready_topics, ordered)
    bridge = BridgeService(settings)
    await bridge.start()
    reader = TopicReader(ready_topics, ready_topics.topic_messages)
    try:
        messages = workload(rooms=50, per_room=20, run_id=test_id)
        for future in [ordered.publish(m) for m in messages]:
            future.result(30)
        reader.until(lambda r: len(r) >= len(messages), 60, "all 1000 messages")
        async with aiohttp.ClientSession(f"http://127.0.0.1:{bridge.internal_port}") as http:
            ready = await http.get("/readyz")
            health = await http.get("/healthz")
            exposition = await (await http.get("/metrics")).text()
    finally:
        settled = await bridge.stop()
        reader.poll(0.5)  # anything written late would show up as a duplicate below
        reader.close()
    records = reader.records
    assert settled
    assert (ready.status, health.status) == (200, 200)
    assert 'inturn_bridge_messages_total{mode="pull",outcome="written"}' in exposition
    assert len(records) == len(messages), "a message was written twice although nothing crashed"
    assert per_room_seqs(records) == {room: list(range(1, 21)) for room in {m.room_id for m in messages}}
    for record in records:
        message = decode(Message, record.value)
        assert record.key == message.room_id
        assert record.partition == partition_for(message.room_id, ready_topics.topic_partitions)
        assert record.headers["pubsub_message_id"].decode() == message.attributes["pubsub_message_id"]


async def test_poison_messages_go_to_the_dead_letter_topic_and_the_room_goes_on(
    ready_topics: KafkaSettings, ordered: Ordered, test_id: str
) -> None:
    settings = bridge_settings(ready_topics, ordered, bridge_max_message_bytes=2000)
    bridge = BridgeService(settings)
    await bridge.start()
    dlq = TopicReader(ready_topics, ready_topics.topic_dlq)
    out = TopicReader(ready_topics, ready_topics.topic_messages)
    first, last = workload(rooms=1, per_room=2, run_id=test_id)
    try:
        ordered.publish(first).result(30)
        poison = {
            ordered.publish_raw(encode(first)): "no_room",
            ordered.publish_raw(b"not json at all", ordering_key=first.room_id): "undecodable",
            ordered.publish_raw(b"x" * 3000, ordering_key=first.room_id): "too_large",
            ordered.publish_raw(encode(first), ordering_key="room-other"): "room_mismatch",
        }
        ordered.publish(last).result(30)
        dlq.until(lambda r: len(r) >= len(poison), 30, "four dead letters")
        out.until(lambda r: len(r) >= 2, 30, "the two good messages")
    finally:
        await bridge.stop()
        dlq.close()
        out.close()
    letters = {dl.message_id: dl for dl in (decode(DeadLetter, r.value) for r in dlq.records)}
    assert set(letters) == set(poison)
    for pubsub_id, kind in poison.items():
        assert letters[pubsub_id].source == "bridge"
        assert letters[pubsub_id].reason.startswith(f"{kind}: ")
    assert letters[next(i for i, k in poison.items() if k == "undecodable")].raw() == b"not json at all"
    too_large = letters[next(i for i, k in poison.items() if k == "too_large")]
    assert too_large.raw() == b"x" * 2000
    assert "keeps the first 2000 bytes" in too_large.reason
    assert [decode(Message, r.value).message_id for r in out.records] == [first.message_id, last.message_id]


async def test_in_attribute_mode_the_message_is_built_from_attributes_and_the_json_payload(
    ready_topics: KafkaSettings, ordered: Ordered
) -> None:
    settings = bridge_settings(ready_topics, ordered, bridge_room_attribute="room")
    bridge = BridgeService(settings)
    await bridge.start()
    out = TopicReader(ready_topics, ready_topics.topic_messages)
    dlq = TopicReader(ready_topics, ready_topics.topic_dlq)
    try:
        good = ordered.publish_raw(
            b'{"type":"text","text":{"body":"hi"}}',
            ordering_key="chat-7",
            room="chat-7",
            platform="whatsapp",
            recipient="4917000007",
            tenant="acme",
        )
        missing = ordered.publish_raw(b'{"type":"text"}', ordering_key="chat-7", room="chat-7", platform="whatsapp")
        out.until(lambda r: len(r) >= 1, 30, "the message")
        dlq.until(lambda r: len(r) >= 1, 30, "the dead letter")
    finally:
        await bridge.stop()
        out.close()
        dlq.close()
    message = decode(Message, out.records[0].value)
    assert out.records[0].key == "chat-7"
    assert (message.room_id, message.message_id, message.platform, message.recipient) == (
        "chat-7",
        good,
        "whatsapp",
        "4917000007",
    )
    assert message.payload == {"type": "text", "text": {"body": "hi"}}
    assert message.attributes == {"room": "chat-7", "tenant": "acme", "pubsub_message_id": good}
    letter = decode(DeadLetter, dlq.records[0].value)
    assert letter.message_id == missing
    assert letter.reason.startswith("undecodable: Message: recipient")
