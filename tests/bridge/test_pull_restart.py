"""Pull mode across a crash (kill -9 of `inturn bridge`) and across a graceful stop: nothing lost, order kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from inturn.devstack.process import free_port, tail
from inturn.kafka import partition_for
from inturn.schemas import Message, decode
from inturn.settings import KafkaSettings
from inturn_bridge.service import BridgeService
from tests.bridge.conftest import PROJECT, Ordered, TopicReader, bridge_settings, per_room_seqs, workload

pytestmark = [pytest.mark.kafka, pytest.mark.pubsub]

ROOMS, PER_ROOM, MAX_MESSAGES = 50, 20, 100


def publish_in_rounds(ordered: Ordered, messages: list[Message], rounds: int, pause: float) -> threading.Thread:
    """Publish ``messages`` in ``rounds`` slices, ``pause`` seconds apart, from a thread (so the bridge works meanwhile)."""

    def run() -> None:
        size = len(messages) // rounds
        for r in range(rounds):
            for future in [ordered.publish(m) for m in messages[r * size : (r + 1) * size]]:
                future.result(30)
            time.sleep(pause)  # pacing the publisher, not waiting for a condition

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


class BridgeProcess:
    """``inturn bridge`` as a child process with its own log file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.log = log
        inturn = Path(sys.executable).parent / "inturn"
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(inturn), "bridge", "--port", str(self.port)], env=env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 60
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"the bridge did not become ready{tail(log)}")
            time.sleep(0.1)  # polling /readyz with a deadline

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as resp:
                return int(resp.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, sig: int) -> int:
        """Send ``sig`` and return the exit code."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        return self.proc.wait(60)


@pytest.fixture
def bridge_env(ready_topics: KafkaSettings, ordered: Ordered, pubsub_host: str) -> Iterator[dict[str, str]]:
    """The environment of `inturn bridge` for this test's topics and subscription."""
    yield {
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


def test_kill_9_mid_stream_and_restart_loses_nothing_keeps_room_order_and_duplicates_are_few_and_marked(
    ready_topics: KafkaSettings, ordered: Ordered, bridge_env: dict[str, str], tmp_path: Path, test_id: str
) -> None:
    messages = workload(ROOMS, PER_ROOM, test_id)
    reader = TopicReader(ready_topics, ready_topics.topic_messages)
    first = BridgeProcess(bridge_env, tmp_path / "bridge.log")
    publisher = publish_in_rounds(ordered, messages, rounds=PER_ROOM, pause=0.1)
    try:
        reader.until(lambda r: len(r) >= 300, 60, "300 records before the kill")
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
        written_before_kill = len(reader.poll(0.5)) + 300
        second = BridgeProcess(bridge_env, tmp_path / "bridge.log")
        publisher.join(60)
        ids = {m.message_id for m in messages}
        reader.until(lambda r: {decode(Message, x.value).message_id for x in r} >= ids, 90, "every message")
        assert second.stop(signal.SIGTERM) == 0, tail(tmp_path / "bridge.log")
        reader.poll(1.0)
    finally:
        for proc in (first.proc, locals().get("second", first).proc):
            if proc.poll() is None:
                proc.kill()
        reader.close()
    records = reader.records
    by_id = Counter(r.headers["pubsub_message_id"] for r in records)
    duplicates = sum(n - 1 for n in by_id.values())
    print(f"kill -9 after >= {written_before_kill} written: {len(records)} records, {duplicates} duplicates")
    assert {decode(Message, r.value).message_id for r in records} == {m.message_id for m in messages}
    assert per_room_seqs(records) == {room: list(range(1, PER_ROOM + 1)) for room in {m.room_id for m in messages}}
    assert duplicates <= MAX_MESSAGES, "more duplicates than messages the killed bridge could have held"
    first_value: dict[bytes, bytes] = {}
    for record in records:
        message = decode(Message, record.value)
        assert record.partition == partition_for(message.room_id, ready_topics.topic_partitions)
        # A duplicate is the very same record again: same Pub/Sub id in header and attributes, same bytes.
        assert message.attributes["pubsub_message_id"] == record.headers["pubsub_message_id"].decode()
        assert first_value.setdefault(record.headers["pubsub_message_id"], record.value) == record.value


async def test_a_graceful_stop_acks_everything_it_wrote_so_a_successor_writes_no_duplicates(
    ready_topics: KafkaSettings, ordered: Ordered, test_id: str
) -> None:
    messages = workload(20, 10, test_id)
    settings = bridge_settings(ready_topics, ordered)
    reader = TopicReader(ready_topics, ready_topics.topic_messages)
    first = BridgeService(settings)
    await first.start()
    publisher = publish_in_rounds(ordered, messages, rounds=10, pause=0.05)
    try:
        reader.until(lambda r: len(r) >= 50, 30, "50 records before the stop")
        assert await first.stop(), "outstanding writes did not settle"
        second = BridgeService(settings)
        await second.start()
        publisher.join(30)
        reader.until(lambda r: len(r) >= len(messages), 60, "every message")
        await second.stop()
        reader.poll(1.0)
    finally:
        reader.close()
    assert len(reader.records) == len(messages), "a message written by the first bridge was written again"
    assert per_room_seqs(reader.records) == {room: list(range(1, 11)) for room in {m.room_id for m in messages}}
