"""Operator commands against real PostgreSQL and Kafka: rooms show/unblock, dlq list/replay."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from inturn.schemas import Message, decode
from inturn.settings import KafkaSettings, load
from inturn.settings.operator import OperatorSettings
from inturn.settings.worker import WorkerSettings
from inturn_cli.commands.rooms import room_info
from inturn_cli.main import main
from tests.support.messages import text_message
from tests.worker.harness import (
    ScriptedPlatform,
    events,
    produce,
    read_topic,
    running_worker,
)

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

ROOM_API_TOKEN = "operator-test-room-token"


@pytest.fixture
def operator_env(inturn_topics: KafkaSettings, pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator commands' environment: this test's topics and schema."""
    monkeypatch.setenv("INTURN_KAFKA_BOOTSTRAP", inturn_topics.kafka_bootstrap)
    monkeypatch.setenv("INTURN_TOPIC_MESSAGES", inturn_topics.topic_messages)
    monkeypatch.setenv("INTURN_TOPIC_PARTITIONS", str(inturn_topics.topic_partitions))
    monkeypatch.setenv("INTURN_POSTGRES_DSN", pg_schema)
    monkeypatch.setenv("INTURN_WORKER_ROOM_API_TOKEN", ROOM_API_TOKEN)


async def test_dead_letters_are_listed_replayed_in_room_order_and_a_blocked_room_released(
    inturn_topics: KafkaSettings,
    platform: ScriptedPlatform,
    operator_env: None,
    capsys: pytest.CaptureFixture[str],
    make_settings: Callable[..., WorkerSettings],
) -> None:
    platform.behaviour["B"].answers.extend([(400, None), (422, None)])
    produce(inturn_topics, [text_message("B", "b0"), text_message("B", "b1"), text_message("B", "b2")])
    settings = make_settings(
        worker_dead_letter_policy="block",
        worker_room_api_token=ROOM_API_TOKEN,
    )
    async with running_worker(settings) as worker:
        await events(inturn_topics, expect_terminal=1)
        operator = load(OperatorSettings)
        # The checkpoint writes the cursor within ~100 ms; PostgreSQL has no event to wait on, so poll.
        while (await room_info(operator, "B"))["cursor"] is None:  # noqa: ASYNC110 - PostgreSQL has no event to wait on
            await asyncio.sleep(0.05)
        assert (
            await asyncio.to_thread(
                main, ["rooms", "show", "B", "--json", "--worker", f"http://127.0.0.1:{worker.http_port}"]
            )
            == 0
        )
    shown = json.loads(capsys.readouterr().out)
    assert shown["blocked"]["reason"].startswith("HTTP 400")
    assert shown["cursor"]["message_id"] == "b0"
    assert shown["cursor"]["outcome"] == "dead_lettered"
    assert [d["message_id"] for d in shown["dead_letters"]] == ["b0"]
    assert shown["in_memory"][0]["head_message_id"] == "b1"
    assert shown["in_memory"][0]["blocked"] is True

    assert await asyncio.to_thread(main, ["dlq", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(d["room_id"], d["message_id"]) for d in listed] == [("B", "b0")]
    assert await asyncio.to_thread(main, ["dlq", "replay", "--yes"]) == 0
    assert "replayed 1" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["dlq", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    republished = [
        decode(Message, v).message_id for v in read_topic(inturn_topics, inturn_topics.topic_messages, expect=4)
    ]
    assert republished == ["b0", "b1", "b2", "b0"]

    assert await asyncio.to_thread(main, ["rooms", "unblock", "B"]) == 0
    assert capsys.readouterr().out.strip() == "released"
    assert await asyncio.to_thread(main, ["rooms", "unblock", "B"]) == 0
    assert capsys.readouterr().out.strip() == "was not blocked"
