"""Pull-mode bridge throughput (messages/s in one process) against the raw emulator pull rate.

Both read the same backlog (N messages over R rooms, ordering key = room) from two subscriptions
of one topic with the same flow control: the baseline is a bare streaming-pull subscriber that
only acks; the bridge decodes, writes to Kafka, waits for the confirmation and then acks. The
ratio bridge/baseline is the figure that travels between machines; the absolute rates depend on
the emulator, which is much slower than real Pub/Sub.

Uses ``INTURN_KAFKA_BOOTSTRAP`` and ``PUBSUB_EMULATOR_HOST`` when set, else starts both locally.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from contextlib import ExitStack
from typing import Any

from google.cloud import pubsub_v1

from inturn import topics
from inturn.kafka import make_admin
from inturn.metrics import bridge as metrics
from inturn.schemas import encode
from inturn.sdk import MessageProducer, plan_messages, planned_to_message
from inturn.settings.bridge import BridgeSettings
from inturn_bridge.pull import PullBridge
from inturn_bridge.relay import Relay
from inturn_bridge.subscription import ensure
from inturn_devtools import LocalKafka, LocalPubSub
from inturn_devtools.waiting import wait_until

PROJECT = "inturn-bench"
MAX_MESSAGES = 1000


def run(quick: bool = False) -> dict[str, Any]:
    """Publish a backlog, drain it with a bare subscriber and with the bridge; both rates and their ratio."""
    messages, rooms = (3_000, 100) if quick else (20_000, 500)
    with ExitStack() as stack:
        bootstrap = os.environ.get("INTURN_KAFKA_BOOTSTRAP")
        if not bootstrap:
            bootstrap = stack.enter_context(LocalKafka()).bootstrap
        if not os.environ.get("PUBSUB_EMULATOR_HOST"):
            os.environ["PUBSUB_EMULATOR_HOST"] = stack.enter_context(LocalPubSub()).host
            stack.callback(os.environ.pop, "PUBSUB_EMULATOR_HOST", None)
        run_id = uuid.uuid4().hex[:8]
        settings = BridgeSettings(
            kafka_bootstrap=bootstrap,
            **topics.prefixed(f"bench{run_id}"),
            topic_partitions=12,
            bridge_project=PROJECT,
            bridge_subscription=f"bridge-{run_id}",
            bridge_max_messages=MAX_MESSAGES,
        )
        topics.create(make_admin(settings), settings)
        baseline_sub = f"baseline-{run_id}"
        publish_s = _publish_backlog(run_id, messages, rooms, [baseline_sub, settings.bridge_subscription])
        baseline = _drain_bare(baseline_sub, messages)
        bridge = _drain_bridge(settings, messages)
    return {
        "messages": messages,
        "rooms": rooms,
        "flow_control_max_messages": MAX_MESSAGES,
        "publish_msgs_per_s": round(messages / publish_s),
        "baseline_ack_only_msgs_per_s": round(messages / baseline),
        "bridge_msgs_per_s": round(messages / bridge),
        "bridge_over_baseline": round(baseline / bridge, 3),
    }


def _publish_backlog(run_id: str, messages: int, rooms: int, subscriptions: list[str]) -> float:
    """Create the topic and subscriptions, publish the backlog; seconds spent publishing."""
    publisher = pubsub_v1.PublisherClient(
        publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
    )
    topic = publisher.topic_path(PROJECT, f"bench-{run_id}")
    for sub in subscriptions:
        ensure(PROJECT, f"bench-{run_id}", sub)
    started = time.monotonic()
    futures = [
        publisher.publish(topic, encode(planned_to_message(p, run_id)), ordering_key=p.room_id)
        for p in plan_messages(rooms=rooms, messages=messages)
    ]
    for future in futures:
        future.result(120)
    elapsed = time.monotonic() - started
    publisher.stop()
    return elapsed


def _drain_bare(subscription: str, messages: int) -> float:
    """Seconds a subscriber that only acks takes to receive the whole backlog."""
    subscriber = pubsub_v1.SubscriberClient()
    seen: set[str] = set()
    done = threading.Event()
    lock = threading.Lock()

    def on_message(message: Any) -> None:
        message.ack()
        with lock:
            seen.add(message.message_id)
            if len(seen) >= messages:
                done.set()

    started = time.monotonic()
    stream = subscriber.subscribe(
        subscriber.subscription_path(PROJECT, subscription),
        callback=on_message,
        flow_control=pubsub_v1.types.FlowControl(max_messages=MAX_MESSAGES),
    )
    if not done.wait(600):
        raise TimeoutError(f"baseline received {len(seen)} of {messages}")
    elapsed = time.monotonic() - started
    stream.cancel()
    stream.result(30)
    subscriber.close()
    return elapsed


def _drain_bridge(settings: BridgeSettings, messages: int) -> float:
    """Seconds the bridge takes to write (Kafka confirmed) and ack the whole backlog."""
    written = metrics.MESSAGES.labels("pull", "written")
    before = written._value.get()
    producer = MessageProducer(settings, **{"message.timeout.ms": settings.bridge_kafka_delivery_timeout_ms})
    bridge = PullBridge(settings, Relay(settings, producer))
    started = time.monotonic()
    bridge.start()
    wait_until(  # polling the written counter; the interval bounds the timing error to 10 ms
        lambda: written._value.get() - before >= messages,
        600,
        lambda: f"the bridge writing {messages} (wrote {written._value.get() - before})",
        every=0.01,
    )
    elapsed = time.monotonic() - started
    bridge.stop(30)
    producer.close()
    return elapsed
