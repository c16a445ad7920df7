"""``inturn pubsub setup`` and ``inturn dev up``: a newcomer gets the Pub/Sub topic and the ordered subscription the
bridge reads without writing any client code."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.cloud import pubsub_v1

from inturn.errors import ConfigError
from inturn.schemas import Message, decode, encode, now_ms
from inturn.settings import KafkaSettings
from inturn.settings.bridge import BridgeSettings
from inturn_bridge.subscription import DEFAULT_TOPIC, ensure
from inturn_cli.main import main
from inturn_devtools.reading import TopicReader

PROJECT = "inturn-setup-test"
INTURN = str(Path(sys.executable).with_name("inturn"))


@pytest.mark.pubsub
def test_pubsub_setup_creates_an_ordered_subscription_and_a_second_run_finds_it(
    pubsub_host: str, test_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["pubsub", "setup", "--project", PROJECT, "--topic", f"t{test_id}", "--subscription", f"s{test_id}"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    second = capsys.readouterr().out
    assert f"projects/{PROJECT}/topics/t{test_id} (created)" in first
    assert f"projects/{PROJECT}/subscriptions/s{test_id} (created, ordered)" in first
    assert f"projects/{PROJECT}/topics/t{test_id} (existed)" in second
    assert f"projects/{PROJECT}/subscriptions/s{test_id} (existed, ordered)" in second
    subscriber = pubsub_v1.SubscriberClient()
    try:
        found = subscriber.get_subscription(subscription=f"projects/{PROJECT}/subscriptions/s{test_id}")
    finally:
        subscriber.close()
    assert found.enable_message_ordering
    assert found.topic == f"projects/{PROJECT}/topics/t{test_id}"


@pytest.mark.pubsub
def test_pubsub_setup_refuses_an_existing_subscription_without_ordering(pubsub_host: str, test_id: str) -> None:
    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(PROJECT, f"u{test_id}")
    publisher.create_topic(name=topic)
    subscriber.create_subscription(
        request={"name": subscriber.subscription_path(PROJECT, f"u{test_id}"), "topic": topic}
    )
    subscriber.close()
    with pytest.raises(ConfigError, match="without message ordering"):
        ensure(PROJECT, f"u{test_id}", f"u{test_id}")


@pytest.fixture
def dev_stack(tmp_path: Path) -> Iterator[dict[str, str]]:
    """``inturn dev up --detach`` as a newcomer runs it (nothing of the test session's services in its environment);
    yields the environment ``inturn dev env`` prints, and runs ``inturn dev down`` afterwards."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTURN_") and k != "PUBSUB_EMULATOR_HOST"}
    env["INTURN_STATE_DIR"] = str(tmp_path / "state")
    up = subprocess.run([INTURN, "dev", "up", "--detach"], env=env, capture_output=True, text=True, timeout=300)
    try:
        assert up.returncode == 0, up.stderr[-2000:]
        printed = subprocess.run([INTURN, "dev", "env"], env=env, capture_output=True, text=True, timeout=60).stdout
        exported = dict(line.removeprefix("export ").split("=", 1) for line in printed.splitlines() if "=" in line)
        yield {**env, **exported}
    finally:
        subprocess.run([INTURN, "dev", "down"], env=env, capture_output=True, timeout=120, check=False)


@pytest.mark.kafka
@pytest.mark.pubsub
def test_after_dev_up_the_bridge_with_its_default_settings_reads_a_message_published_to_the_emulator(
    dev_stack: dict[str, str], tmp_path: Path, test_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert shutil.which(INTURN) is not None
    # The one override: the bridge's internal port, so the test does not depend on 9091 being free on this machine.
    bridge_env = {**dev_stack, "INTURN_BRIDGE_INTERNAL_PORT": "0"}
    log = (tmp_path / "bridge.log").open("w")
    bridge = subprocess.Popen(
        [INTURN, "bridge", "--mode", "pull"],
        env=bridge_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    kafka = KafkaSettings(kafka_bootstrap=dev_stack["INTURN_KAFKA_BOOTSTRAP"])
    reader = TopicReader(kafka, kafka.topic_messages)
    try:
        defaults = BridgeSettings(kafka_bootstrap=dev_stack["INTURN_KAFKA_BOOTSTRAP"])
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", dev_stack["PUBSUB_EMULATOR_HOST"])
        publisher = pubsub_v1.PublisherClient(
            publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
        )
        message = Message(
            room_id=f"room-{test_id}",
            message_id=f"{test_id}#1",
            platform="whatsapp",
            recipient="491700000001",
            payload={"type": "text", "text": {"body": "hello"}},
            created_at_ms=now_ms(),
        )
        topic = publisher.topic_path(defaults.bridge_project, DEFAULT_TOPIC)
        publisher.publish(topic, encode(message), ordering_key=message.room_id).result(30)
        publisher.stop()
        records = reader.until(
            lambda rs: any(r.key == message.room_id for r in rs), 90, "the published message on inturn.messages"
        )
        found = [decode(Message, r.value) for r in records if r.key == message.room_id]
        assert [m.message_id for m in found] == [message.message_id]
        assert bridge.poll() is None, "the bridge exited"
    finally:
        reader.close()
        os.killpg(bridge.pid, signal.SIGTERM)
        bridge.wait(60)
        log.close()
