"""The fault matrix, infrastructure rows: the webhook, PostgreSQL, the Kafka broker and the bridge fail mid-run.

PostgreSQL and Kafka get servers of their own here (stopping the session's would break every other
test). The bridge runs in push mode: the Pub/Sub emulator never redelivers ordered messages that were
outstanding on a killed streaming pull (docs/bridge.md), while it retries a push until it is answered,
so push is the mode in which "0 lost across a bridge crash" can be shown against the emulator.
"""

from __future__ import annotations

import threading
import time
import urllib.error
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import TopicPartition
from google.cloud import pubsub_v1

from inturn.kafka import make_consumer
from inturn.schemas import Message, decode, now_ms
from inturn.settings import KafkaSettings
from inturn_devtools import LocalKafka, LocalPostgres
from inturn_devtools.pipeline import PHONE_NUMBER_ID, Pipeline
from inturn_devtools.process import free_port
from inturn_devtools.services import ServiceProcess
from inturn_devtools.waiting import wait_until
from tests.chaos.conftest import CHAOS_SIM, CHAOS_WORKER, Scenario, assert_target, progress, topics_on
from tests.support.pubsub import push_topic
from tests.worker.harness import read_topic

pytestmark = [pytest.mark.chaos, pytest.mark.kafka, pytest.mark.postgres]

ROOMS, PER_ROOM = 1000, 6
OUTAGE_S = 5.0  # how long PostgreSQL / Kafka stay away: the scenario itself, not a wait for a condition


@pytest.fixture
def own_postgres() -> Iterator[LocalPostgres]:
    """A PostgreSQL server of this test's own, to stop and restart."""
    with LocalPostgres() as server:
        yield server


@pytest.fixture
def own_kafka() -> Iterator[LocalKafka]:
    """A broker of this test's own, to stop and restart (the session's broker keeps serving the others)."""
    with LocalKafka() as broker:
        yield broker


@pytest.mark.timeout(420)
def test_kill_9_of_the_webhook_every_15_s_or_third_keeps_every_room_in_order(chaos_pipeline: Pipeline) -> None:
    line = chaos_pipeline
    for name in ("w1", "w2"):
        line.add_worker(name)
    line.wait_balanced()
    per_room = PER_ROOM * 12  # long enough for two kills at 15 s apart at ~1,500 messages/s; faster, by thirds
    total = line.produce(rooms=ROOMS, per_room=per_room)
    scale = f"{ROOMS} rooms x {per_room}, 2 workers"
    scenario = Scenario("kill -9 the webhook every 15 s or third of the run", line, scale)
    webhook = line.webhook
    assert webhook is not None
    next_kill = time.monotonic() + 15
    # A kill is also due when another third of the messages has reached the device: on a box fast enough to
    # finish within 30 s, the run would otherwise end before the second kill.
    thirds = [total // 3, 2 * total // 3]
    while not scenario.done(total):
        assert time.monotonic() - scenario.started < 300, line.report().summary()
        try:
            third_passed = bool(thirds) and scenario.delivered() >= thirds[0]
        except (urllib.error.URLError, OSError):
            third_passed = False  # the simulator is busy; ask again
        if time.monotonic() >= next_kill or third_passed:
            if third_passed:
                thirds.pop(0)
            webhook.kill()
            # Callbacks in flight are retried by the simulator; those that run out of retries before the
            # webhook is back end as ack timeouts. Neither makes the worker send anything twice.
            scenario.fault("kill -9 webhook, restart it on the same port", 0)
            webhook.start()
            next_kill = time.monotonic() + 15
        time.sleep(1.0)  # pacing the faults and polling for the end
    scenario.wait_drained(total, 60)
    report = scenario.verdict()
    stats = line.stats()
    print(f"chaos:   callbacks retried {stats['callback_retries']}, given up {stats['callbacks_failed']}")
    assert len(scenario.faults) >= 2, "the run ended before the second kill"
    assert_target(scenario, report)


@contextmanager
def two_workers(topics_: KafkaSettings, dsn: str, workdir: Path, test_id: str) -> Iterator[Pipeline]:
    """Simulator, webhook and two workers on ``topics_`` and ``dsn``, the group settled; stopped afterwards."""
    with Pipeline(topics_, dsn, workdir, group=f"g{test_id}", sim=CHAOS_SIM, worker=CHAOS_WORKER) as line:
        yield line.start("w1", "w2")


def test_postgres_stopped_and_restarted_mid_run_loses_and_duplicates_nothing(
    inturn_topics: KafkaSettings, own_postgres: LocalPostgres, tmp_path: Path, test_id: str
) -> None:
    with two_workers(inturn_topics, own_postgres.dsn, tmp_path, test_id) as line:
        total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
        scenario = Scenario("PostgreSQL stopped and restarted", line, f"{ROOMS} rooms x {PER_ROOM}, 2 workers")
        progress(scenario, 0.25, total)
        own_postgres.stop()
        scenario.fault(f"pg_ctl stop -m fast, {OUTAGE_S:.0f} s away", 0)
        time.sleep(OUTAGE_S)
        stalled_at = scenario.delivered()
        own_postgres.start()
        scenario.fault("PostgreSQL started again", 0)
        scenario.wait_drained(total, 180)
        report = scenario.verdict()
    assert stalled_at < total, "the outage came too late to test anything"
    assert_target(scenario, report)


def in_flight_window(receipts: list[dict[str, Any]], since_ms: int, until_ms: int) -> set[tuple[str, str]]:
    """Messages whose first delivery the platform accepted in [since_ms, until_ms]: the messages that were in
    flight at a fault (sent within one ack timeout before it) or sent while it lasted."""
    first: dict[tuple[str, str], int] = {}
    for receipt in sorted(receipts, key=lambda r: int(r["seq"])):
        key = (receipt["room_id"], receipt["message_id"])
        first.setdefault(key, int(receipt["accepted_at_ms"]))
    return {key for key, at in first.items() if since_ms <= at <= until_ms}


def resent(receipts: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """Messages delivered more than once."""
    counts = Counter((r["room_id"], r["message_id"]) for r in receipts if r.get("room_id") is not None)
    return {key for key, n in counts.items() if n > 1}


@pytest.mark.timeout(1200)  # two brokers start (the session's and this row's) and one restarts, on a loaded box
def test_the_kafka_broker_restarted_mid_run_loses_and_reorders_nothing(
    own_kafka: LocalKafka, kafka_settings: KafkaSettings, postgres_dsn: str, tmp_path: Path, test_id: str
) -> None:
    broker = own_kafka
    ack_timeout_ms = int(CHAOS_WORKER["INTURN_WORKER_ACK_TIMEOUT_MS"])
    with two_workers(topics_on(broker, kafka_settings), postgres_dsn, tmp_path, test_id) as line:
        total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
        scenario = Scenario("Kafka broker restarted", line, f"{ROOMS} rooms x {PER_ROOM}, 2 workers, 1 broker")
        progress(scenario, 0.25, total)
        stopping_ms = now_ms()
        broker.stop()
        # Every partition is affected: at most the message in flight per room may be sent again.
        scenario.fault(f"broker stopped (SIGTERM), {OUTAGE_S:.0f} s away", ROOMS)
        time.sleep(OUTAGE_S)
        broker.start()
        started_ms = now_ms()
        scenario.fault("broker started again with its data", 0)
        scenario.wait_drained(total, 240)
        report = scenario.verdict()
        receipts = line.receipts()
    # The messages in flight when the broker stopped: sent within one ack timeout before the stop, or while it was
    # away (the workers go on sending until their leases lapse). Their statuses cannot reach the acks topic: the
    # webhook answers 503 and the platform gives the callbacks up after its retries (about 1.4 s here).
    in_flight = in_flight_window(receipts, stopping_ms - ack_timeout_ms, started_ms)
    again = resent(receipts)
    crashed = sorted(name for name, w in line.workers.items() if "Traceback" in w.log_file.read_text())
    print(
        f"chaos:   in flight at the stop (sent from {ack_timeout_ms} ms before it until the restart): "
        f"{len(in_flight)}; sent again: {len(again)}, of them in flight at the stop: {len(again & in_flight)}; "
        f"workers that crashed: {crashed}"
    )
    assert crashed == [], "a Kafka error during the restart ended a worker"
    assert_target(scenario, report)  # at most one message sent again per room
    assert again <= in_flight, sorted(again - in_flight)[:10]  # only what was in flight at the stop is sent again


def publish_rooms(publisher: pubsub_v1.PublisherClient, topic: str, line: Pipeline, rooms: int, per_room: int) -> None:
    """Publish ``rooms`` x ``per_room`` in the bridge's attribute format, interleaved; record the room order."""
    futures = []
    for n in range(per_room):
        for r in range(rooms):
            room, message_id = f"room-{r}", f"room-{r}#{n}"
            body = orjson.dumps({"type": "text", "text": {"body": message_id}})
            attributes = {
                "room": room,
                "platform": "whatsapp",
                "account": PHONE_NUMBER_ID,
                "recipient": f"49170{r:07d}",
                "message_id": message_id,
            }
            futures.append(publisher.publish(topic, body, ordering_key=room, **attributes))
            line.produced.setdefault(room, []).append(message_id)
    for future in futures:
        future.result(60)


def messages_in_kafka(settings: KafkaSettings) -> int:
    """Records on the messages topic (the sum of its partitions' high watermarks)."""
    consumer = make_consumer(settings, "watermarks")
    try:
        parts = [TopicPartition(settings.topic_messages, p) for p in range(settings.topic_partitions)]
        return sum(consumer.get_watermark_offsets(tp, timeout=5)[1] for tp in parts)
    finally:
        consumer.close()


@pytest.mark.pubsub
def test_the_push_bridge_killed_mid_stream_loses_and_reorders_nothing_at_the_device(
    chaos_pipeline: Pipeline, pubsub_host: str, test_id: str
) -> None:
    line = chaos_pipeline
    rooms, per_room = 200, 8
    project, port, internal_port = "inturn-chaos", free_port(), free_port()
    publisher, topic = push_topic(project, f"chaos{test_id}", f"http://127.0.0.1:{port}/push")
    env = {
        "INTURN_KAFKA_BOOTSTRAP": line.topics.kafka_bootstrap,
        "INTURN_TOPIC_MESSAGES": line.topics.topic_messages,
        "INTURN_TOPIC_DLQ": line.topics.topic_dlq,
        "INTURN_LOG_FORMAT": "json",
        "PUBSUB_EMULATOR_HOST": pubsub_host,
        "INTURN_BRIDGE_MODE": "push",
        "INTURN_BRIDGE_PROJECT": project,
        "INTURN_BRIDGE_SUBSCRIPTION": f"chaos{test_id}",
        # The emulator leaves orderingKey out of push envelopes: the room travels as an attribute.
        "INTURN_BRIDGE_ROOM_ATTRIBUTE": "room",
        "INTURN_BRIDGE_HTTP_HOST": "127.0.0.1",
        "INTURN_BRIDGE_HTTP_PORT": str(port),
        "INTURN_BRIDGE_INTERNAL_PORT": str(internal_port),
    }
    bridge = ServiceProcess("bridge", ["bridge"], env, line.workdir, f"http://127.0.0.1:{internal_port}/readyz").start()
    line.bridges.append(bridge)
    for name in ("w1", "w2"):
        line.add_worker(name)
    total = rooms * per_room
    scenario = Scenario("bridge killed (push mode)", line, f"{rooms} rooms x {per_room} via Pub/Sub push, 2 workers")
    sender = threading.Thread(target=publish_rooms, args=(publisher, topic, line, rooms, per_room), daemon=True)
    sender.start()
    try:
        wait_until(
            lambda: messages_in_kafka(line.topics) >= total // 3, 90, "a third of the messages in Kafka", every=0.2
        )
        bridge.kill()
        # With ordering, Pub/Sub pushes one message per room at a time: at most one per room was in flight, and the
        # restarted bridge may write it again. The worker knows a second copy by its id: nothing twice at the device.
        scenario.fault(f"kill -9 bridge at {messages_in_kafka(line.topics)} records, restart on the same port", 0)
        bridge.start()
        sender.join(90)
        scenario.wait_drained(total, 180)
        report = scenario.verdict()
    finally:
        publisher.stop()
    records = [decode(Message, value) for value in read_topic(line.topics, line.topics.topic_messages)]
    rewritten = sum(n - 1 for n in Counter(m.message_id for m in records).values())
    print(f"chaos:   {len(records)} records on Kafka, {rewritten} written twice by the restarted bridge")
    assert rewritten <= rooms
    assert_target(scenario, report)
