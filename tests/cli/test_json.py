"""``--json`` of the commands that print data, parsed and checked against the real PostgreSQL, Kafka and Pub/Sub
emulator; ``dlq replay``'s confirmation; ``rooms show`` asking a worker with the room API's token."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import asyncpg
import pytest

from inturn.kafka import partition_for
from inturn.settings import KafkaSettings
from inturn_cli.main import main
from tests.cli.harness import INTURN, assert_one_line_failure, clean_env, run
from tests.support.topics import cli_on, read_topic

TOKEN = "room-api-token-for-this-test"


async def cli(argv: list[str]) -> int:
    """``inturn argv`` in this process, off the test's event loop (the commands run their own)."""
    return await asyncio.to_thread(main, argv)


@pytest.fixture
def migrated(pg_schema: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """This test's schema, migrated by ``inturn migrate --json`` (whose output is checked here)."""
    monkeypatch.setenv("INTURN_POSTGRES_DSN", pg_schema)
    assert main(["migrate", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["applied"][:2] == ["0001_initial.sql", "0002_recent_message_ids.sql"]
    assert main(["migrate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"applied": []}
    return pg_schema


@pytest.fixture
def operator_env(migrated: str, inturn_topics: KafkaSettings, monkeypatch: pytest.MonkeyPatch) -> KafkaSettings:
    cli_on(inturn_topics, monkeypatch)
    monkeypatch.setenv("INTURN_TOPIC_PARTITIONS", str(inturn_topics.topic_partitions))
    return inturn_topics


async def _seed(dsn: str, topic: str) -> None:
    """Room A: a cursor, its partition's owner, a block and two dead letters (one replayed)."""
    conn = await asyncpg.connect(dsn)
    try:
        part = partition_for("A", 4)
        await conn.execute(
            "INSERT INTO room_cursors (messages_topic, room_id, partition, terminal_offset, message_id, outcome, epoch)"
            " VALUES ($1, 'A', $2, 41, 'a7', 'dead_lettered', 3)",
            topic,
            part,
        )
        await conn.execute(
            "INSERT INTO partition_epochs (messages_topic, partition, epoch, owner) VALUES ($1, $2, 3, 'worker-1')",
            topic,
            part,
        )
        await conn.execute(
            "INSERT INTO blocked_rooms (messages_topic, room_id, reason) VALUES ($1, 'A', 'HTTP 400 bad recipient')",
            topic,
        )
        await conn.execute(
            "INSERT INTO dead_letters (source, reason, room_id, message_id, topic, partition, kafka_offset, raw,"
            " replayed_at) VALUES ('worker', 'HTTP 400 bad recipient', 'A', 'a7', $1, $2, 41, 'raw-a7', NULL),"
            " ('worker', 'HTTP 422', 'A', 'a2', $1, $2, 12, 'raw-a2', now())",
            topic,
            part,
        )
    finally:
        await conn.close()


class _Worker(BaseHTTPRequestHandler):
    """The worker's room API as the contract has it: 401 without the right bearer token."""

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"room_id": self.path.rsplit("/", 1)[-1], "head_message_id": "a8", "buffered": 3}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def worker_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Worker)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join(5)


@pytest.mark.kafka
@pytest.mark.postgres
async def test_rooms_show_and_unblock_json(
    operator_env: KafkaSettings,
    migrated: str,
    worker_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _seed(migrated, operator_env.topic_messages)
    monkeypatch.setenv("INTURN_WORKER_ROOM_API_TOKEN", TOKEN)
    assert await cli(["rooms", "show", "A", "--json", "--worker", worker_url]) == 0
    shown = json.loads(capsys.readouterr().out)
    part = partition_for("A", 4)
    assert shown["room_id"] == "A"
    assert shown["partition"] == part
    assert shown["partitions_known"] == 1
    assert {k: shown["cursor"][k] for k in ("partition", "terminal_offset", "message_id", "outcome", "epoch")} == {
        "partition": part,
        "terminal_offset": 41,
        "message_id": "a7",
        "outcome": "dead_lettered",
        "epoch": 3,
    }
    assert (shown["owner"]["owner"], shown["owner"]["epoch"]) == ("worker-1", 3)
    assert shown["blocked"]["reason"] == "HTTP 400 bad recipient"
    assert [(d["message_id"], d["replayed_at"] is None) for d in shown["dead_letters"]] == [
        ("a2", False),
        ("a7", True),
    ]
    assert shown["in_memory"] == [{"worker": worker_url, "room_id": "A", "head_message_id": "a8", "buffered": 3}]

    assert await cli(["rooms", "show", "A", "--worker", worker_url]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == f"room A: partition {part}"
    assert "  blocked: HTTP 400 bad recipient since " in "\n".join(text)
    assert "  dead letters: 2" in text

    monkeypatch.setenv("INTURN_WORKER_ROOM_API_TOKEN", "a-wrong-token")
    assert await cli(["rooms", "show", "A", "--json", "--worker", worker_url]) == 0
    refused = json.loads(capsys.readouterr().out)["in_memory"]
    assert refused == [
        {"worker": worker_url, "error": "HTTP 401: the worker refused the token; check INTURN_WORKER_ROOM_API_TOKEN"}
    ]

    assert await cli(["rooms", "show", "nobody", "--json"]) == 0
    empty = json.loads(capsys.readouterr().out)
    assert (empty["cursor"], empty["owner"], empty["blocked"], empty["dead_letters"]) == (None, None, None, [])
    assert empty["partition"] == partition_for("nobody", 4)

    assert await cli(["rooms", "unblock", "A", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"room_id": "A", "released": True}
    assert await cli(["rooms", "unblock", "A", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"room_id": "A", "released": False}


@pytest.mark.kafka
@pytest.mark.postgres
async def test_dlq_list_and_replay_json_and_replay_asks_first(
    operator_env: KafkaSettings, migrated: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await _seed(migrated, operator_env.topic_messages)
    assert await cli(["dlq", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(d["source"], d["room_id"], d["message_id"], d["kafka_offset"]) for d in listed] == [
        ("worker", "A", "a7", 41)
    ]
    assert "raw" not in listed[0]

    # No terminal to ask on (stdin is /dev/null) and no --yes: refused, nothing replayed.
    env = clean_env(
        INTURN_POSTGRES_DSN=migrated,
        INTURN_KAFKA_BOOTSTRAP=operator_env.kafka_bootstrap,
        INTURN_TOPIC_MESSAGES=operator_env.topic_messages,
    )
    refused = run("dlq", "replay", env=env)
    assert_one_line_failure(refused, "not replaying 1 dead letters without a confirmation", "--yes")

    answered_no = await asyncio.to_thread(replay_on_a_terminal, env, "n")
    question = f"replay 1 dead letters to {operator_env.topic_messages}? [y/N] "
    assert (answered_no.returncode, answered_no.stdout) == (1, question + "nothing replayed\n")

    assert await cli(["dlq", "replay", "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["would_replay"] == [{"id": listed[0]["id"], "room_id": "A", "message_id": "a7"}]
    assert dry["replayed"] == []
    assert read_topic(operator_env, operator_env.topic_messages, timeout=3) == []

    assert await cli(["dlq", "replay", "--yes", "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed == {
        "replayed": [{"id": listed[0]["id"], "room_id": "A", "message_id": "a7"}],
        "would_replay": [],
        "topic": operator_env.topic_messages,
    }
    assert read_topic(operator_env, operator_env.topic_messages, expect=1) == [b"raw-a7"]
    assert await cli(["dlq", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def replay_on_a_terminal(env: dict[str, str], answer: str) -> subprocess.CompletedProcess[str]:
    """``inturn dlq replay`` with a terminal (a pty) on stdin, answering its question with ``answer``."""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [INTURN, "dlq", "replay"],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        os.write(controller, f"{answer}\n".encode())  # the terminal keeps the line until the question reads it
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(terminal)
        os.close(controller)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.kafka
@pytest.mark.postgres
async def test_dlq_replay_answered_yes_on_a_terminal_replays(operator_env: KafkaSettings, migrated: str) -> None:
    await _seed(migrated, operator_env.topic_messages)
    env = clean_env(
        INTURN_POSTGRES_DSN=migrated,
        INTURN_KAFKA_BOOTSTRAP=operator_env.kafka_bootstrap,
        INTURN_TOPIC_MESSAGES=operator_env.topic_messages,
    )
    done = await asyncio.to_thread(replay_on_a_terminal, env, "y")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.endswith("? [y/N] replayed 1 dead letters\n")
    assert read_topic(operator_env, operator_env.topic_messages, expect=1) == [b"raw-a7"]


@pytest.mark.kafka
def test_produce_json(
    inturn_topics: KafkaSettings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_on(inturn_topics, monkeypatch)
    assert main(["produce", "--rooms", "3", "--messages", "9", "--run-id", "j1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {k: summary[k] for k in ("target", "run_id", "rooms", "planned", "produced", "failed")} == {
        "target": inturn_topics.topic_messages,
        "run_id": "j1",
        "rooms": 3,
        "planned": 9,
        "produced": 9,
        "failed": 0,
    }
    assert len(read_topic(inturn_topics, inturn_topics.topic_messages, expect=9)) == 9


def test_pubsub_setup_json(pubsub_host: str, test_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["pubsub", "setup", "--project", "p-cli", "--topic", f"t{test_id}", "--subscription", f"s{test_id}"]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "topic": f"projects/p-cli/topics/t{test_id}",
        "created_topic": True,
        "subscription": f"projects/p-cli/subscriptions/s{test_id}",
        "created_subscription": True,
        "ordered": True,
    }
    assert main([*args, "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["created_topic"], again["created_subscription"]) == (False, False)
