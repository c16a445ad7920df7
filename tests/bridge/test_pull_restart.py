"""The bridge across a crash (kill -9 of `inturn bridge`, pull and push) and across a graceful stop.

The Pub/Sub emulator (0.8.20) never redelivers ordered messages that were outstanding on a stream
that closed: its gRPC server fails on stream close (``NoSuchMethodError`` in its log), keeps the dead
stream, and the ordering keys it held stay with it. Real Pub/Sub redelivers them after the ack
deadline. So after a restart some rooms stop where the emulator stranded them; what these tests can
and do check for every room is that Kafka holds a gap-free, in-order prefix of the room's messages
(nothing acked without being written, nothing reordered). Push subscriptions do not use streams:
the emulator retries a failed push (one message per ordering key at a time) until the restarted
bridge answers, so the push test shows the whole guarantee across kill -9: nothing lost, order kept.
See docs/bridge.md, "Testing against the emulator".
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from inturn.kafka import partition_for
from inturn.metrics import bridge as metrics
from inturn.schemas import Message, decode
from inturn.settings import KafkaSettings
from inturn_bridge.service import BridgeService
from inturn_devtools.process import free_port
from inturn_devtools.reading import Record, TopicReader
from inturn_devtools.services import ServiceProcess
from inturn_devtools.waiting import tail
from tests.bridge.conftest import PROJECT, Ordered, bridge_settings, per_room_seqs, workload
from tests.support.pubsub import push_topic

pytestmark = [pytest.mark.kafka, pytest.mark.pubsub]

ROOMS, PER_ROOM, MAX_MESSAGES = 50, 12, 100


def publish_in_rounds(
    ordered: Ordered, messages: list[Message], rounds: int, pause: float, as_attributes: bool = False
) -> threading.Thread:
    """Publish ``messages`` in ``rounds`` slices ``pause`` seconds apart, from a thread (the bridge works meanwhile)."""

    def run() -> None:
        size = len(messages) // rounds
        for r in range(rounds):
            batch = messages[r * size : (r + 1) * size]
            for future in [_publish_attributes(ordered, m) if as_attributes else ordered.publish(m) for m in batch]:
                future.result(30)
            time.sleep(pause)  # pacing the publisher, not waiting for a condition

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _publish_attributes(ordered: Ordered, message: Message) -> Any:
    """Publish ``message`` in the attribute format (room attribute ``room``; data = the payload)."""
    return ordered.publisher.publish(
        ordered.topic,
        orjson.dumps(message.payload),
        ordering_key=message.room_id,
        room=message.room_id,
        platform=message.platform,
        recipient=message.recipient,
        message_id=message.message_id,
        **message.attributes,
    )


@pytest.fixture
def bridges(tmp_path: Path) -> Iterator[Callable[..., ServiceProcess]]:
    """Starts ``inturn bridge`` processes (``env``, then command-line arguments; the push endpoint on ``port`` or a
    free one), ready, logging to one ``bridge.log``; kills any still running when the test ends."""
    started: list[ServiceProcess] = []

    def start(env: dict[str, str], *args: str, port: int | None = None) -> ServiceProcess:
        internal_port = free_port()
        bridge = ServiceProcess(
            "bridge",
            ["bridge", "--port", str(port or free_port()), *args],
            {**env, "INTURN_BRIDGE_INTERNAL_PORT": str(internal_port)},
            tmp_path,
            f"http://127.0.0.1:{internal_port}/readyz",
        )
        started.append(bridge)
        return bridge.start()

    yield start
    for bridge in started:
        bridge.kill()


@pytest.fixture
def bridge_env(ready_topics: KafkaSettings, ordered: Ordered, pubsub_host: str) -> dict[str, str]:
    """The environment of `inturn bridge` for this test's topics and subscription."""
    return {
        **os.environ,
        "PUBSUB_EMULATOR_HOST": pubsub_host,
        "INTURN_KAFKA_BOOTSTRAP": ready_topics.kafka_bootstrap,
        "INTURN_TOPIC_MESSAGES": ready_topics.topic_messages,
        "INTURN_TOPIC_DLQ": ready_topics.topic_dlq,
        "INTURN_TOPIC_PARTITIONS": str(ready_topics.topic_partitions),
        "INTURN_BRIDGE_PROJECT": PROJECT,
        "INTURN_BRIDGE_SUBSCRIPTION": ordered.subscription,
        "INTURN_BRIDGE_HTTP_HOST": "127.0.0.1",
        "INTURN_BRIDGE_MAX_MESSAGES": str(MAX_MESSAGES),
        "INTURN_LOG_FORMAT": "json",
    }


def assert_gap_free_prefixes(records: list[Record], rooms: set[str], per_room: int) -> dict[str, int]:
    """Each room's messages in Kafka (first occurrences) are 1..k in order; returns k per room."""
    seqs = per_room_seqs(records)
    for room in rooms:
        got = seqs.get(room, [])
        assert got == list(range(1, len(got) + 1)), f"{room}: {got}"
        assert len(got) <= per_room
    return {room: len(seqs.get(room, [])) for room in rooms}


def test_kill_9_mid_stream_then_restart_keeps_every_room_gap_free_and_in_order_and_duplicates_marked(
    ready_topics: KafkaSettings,
    ordered: Ordered,
    bridge_env: dict[str, str],
    bridges: Callable[..., ServiceProcess],
    test_id: str,
) -> None:
    messages = workload(ROOMS, PER_ROOM, test_id)
    rooms = {m.room_id for m in messages}
    reader = TopicReader(ready_topics, ready_topics.topic_messages)
    first = bridges(bridge_env)
    publisher = publish_in_rounds(ordered, messages, rounds=PER_ROOM, pause=0.1)
    try:
        reader.until(lambda r: len(r) >= 200, 60, "200 records before the kill")
        first.kill()
        reader.poll(0.5)
        at_kill = len(reader.records)
        second = bridges(bridge_env)
        publisher.join(60)
        reader.settle(quiet=12, within=90, done=len(messages))
        assert second.stop() == 0, tail(second.log_file)  # SIGTERM, graceful: drains, then exits 0
        reader.poll(0.5)
    finally:
        reader.close()
    records = reader.records
    by_id = Counter(r.headers["pubsub_message_id"] for r in records)
    duplicates = sum(n - 1 for n in by_id.values())
    written = assert_gap_free_prefixes(records, rooms, PER_ROOM)
    complete = [room for room, k in written.items() if k == PER_ROOM]
    stranded = {room: k for room, k in written.items() if k < PER_ROOM}
    print(
        f"kill -9 at {at_kill} records; {len(records)} records in the end, {duplicates} duplicates, "
        f"{len(complete)} rooms complete, {len(stranded)} stranded by the emulator at {sorted(set(stranded.values()))}"
    )
    # How many rooms the emulator releases to the new stream varies from run to run (0 to half of them
    # were seen), so progress after the restart is reported, not asserted; the push test below asserts it.
    assert duplicates <= MAX_MESSAGES, "more duplicates than messages the killed bridge could have held"
    assert '"event": "bridge.stopped"' in second.log_file.read_text()
    first_value: dict[bytes, bytes] = {}
    for record in records:
        message = decode(Message, record.value)
        assert record.partition == partition_for(message.room_id, ready_topics.topic_partitions)
        # A duplicate is the very same record again: same Pub/Sub id in header and attributes, same bytes.
        assert message.attributes["pubsub_message_id"] == record.headers["pubsub_message_id"].decode()
        assert first_value.setdefault(record.headers["pubsub_message_id"], record.value) == record.value


async def test_a_graceful_stop_waits_for_every_outstanding_write_and_leaves_rooms_gap_free(
    ready_topics: KafkaSettings, ordered: Ordered, test_id: str
) -> None:
    messages = workload(20, 10, test_id)
    settings = bridge_settings(ready_topics, ordered)
    reader = TopicReader(ready_topics, ready_topics.topic_messages)
    bridge = BridgeService(settings)
    await bridge.start()
    written_before = metrics.MESSAGES.labels("pull", "written")._value.get()
    publisher = publish_in_rounds(ordered, messages, rounds=10, pause=0.05)
    try:
        reader.until(lambda r: len(r) >= 50, 30, "50 records before the stop")
        settled = await bridge.stop()
        pending = bridge.relay.pending
        written = metrics.MESSAGES.labels("pull", "written")._value.get() - written_before
        publisher.join(30)
        reader.poll(1.0)
    finally:
        reader.close()
    assert settled
    assert pending == 0
    # Every write the bridge counted (and acked) is in Kafka, and nothing else is.
    assert len(reader.records) == written
    assert_gap_free_prefixes(reader.records, {m.room_id for m in messages}, 10)


def test_push_bridge_killed_mid_stream_and_restarted_loses_nothing_and_keeps_room_order(
    ready_topics: KafkaSettings, bridge_env: dict[str, str], bridges: Callable[..., ServiceProcess], test_id: str
) -> None:
    rooms, per_room = 20, 10
    port = free_port()
    publisher, topic = push_topic(PROJECT, f"push{test_id}", f"http://127.0.0.1:{port}/push")
    ordered = Ordered(topic, f"push{test_id}", publisher)
    messages = workload(rooms, per_room, test_id)
    reader = TopicReader(ready_topics, ready_topics.topic_messages)
    # The emulator leaves orderingKey out of push envelopes (real Pub/Sub sends it): the room travels as
    # an attribute, which is the bridge's attribute format.
    env = {**bridge_env, "INTURN_BRIDGE_ROOM_ATTRIBUTE": "room"}
    first = bridges(env, "--mode", "push", port=port)
    sender = publish_in_rounds(ordered, messages, rounds=per_room, pause=0.1, as_attributes=True)
    try:
        reader.until(lambda r: len(r) >= 60, 60, "60 records before the kill")
        first.kill()
        reader.poll(0.5)
        at_kill = len(reader.records)
        second = bridges(env, "--mode", "push", port=port)
        sender.join(60)
        ids = {m.message_id for m in messages}
        reader.until(lambda r: {decode(Message, x.value).message_id for x in r} >= ids, 90, "every message")
        assert second.stop() == 0, tail(second.log_file)
        reader.poll(0.5)
    finally:
        reader.close()
        publisher.stop()
    records = reader.records
    duplicates = sum(n - 1 for n in Counter(r.headers["pubsub_message_id"] for r in records).values())
    print(f"push kill -9 at {at_kill} records: {len(records)} records in the end, {duplicates} duplicates")
    assert per_room_seqs(records) == {room: list(range(1, per_room + 1)) for room in {m.room_id for m in messages}}
    # At most the one message per room that was being written when the bridge died is written twice.
    assert duplicates <= rooms
    for record in records:
        message = decode(Message, record.value)
        assert record.partition == partition_for(message.room_id, ready_topics.topic_partitions)
        assert message.attributes["pubsub_message_id"] == record.headers["pubsub_message_id"].decode()
