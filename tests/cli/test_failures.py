"""Every failure to reach Kafka, PostgreSQL or Pub/Sub, and every bad argument, is one line on stderr naming what
was tried and what to check, exit code 1, no traceback and no librdkafka line, within 15 s (the bound issue 43 asks
for; process start included). The real ``inturn`` command runs against loopback ports nothing listens on."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from inturn_devtools.stack import StackState, save_state
from tests.cli.harness import assert_one_line_failure, clean_env, closed_port, run


@pytest.fixture(scope="module")
def down() -> dict[str, str]:
    """An environment whose Kafka, PostgreSQL and Pub/Sub emulator are all closed ports."""
    return clean_env(
        INTURN_KAFKA_BOOTSTRAP=f"127.0.0.1:{closed_port()}",
        INTURN_POSTGRES_DSN=f"postgresql://inturn@127.0.0.1:{closed_port()}/inturn",
        PUBSUB_EMULATOR_HOST=f"127.0.0.1:{closed_port()}",
    )


@pytest.mark.parametrize(
    "args",
    [
        ("topics", "check"),
        ("topics", "check", "--json"),
        ("topics", "create"),
        ("produce", "--rooms", "2", "--messages", "4"),
    ],
    ids=" ".join,
)
def test_kafka_down(args: tuple[str, ...], down: dict[str, str]) -> None:
    result = run(*args, env=down)
    assert_one_line_failure(result, "Kafka at " + down["INTURN_KAFKA_BOOTSTRAP"], "check INTURN_KAFKA_BOOTSTRAP")


@pytest.mark.parametrize(
    "args",
    [
        ("rooms", "show", "room-1"),
        ("rooms", "show", "room-1", "--json"),
        ("rooms", "unblock", "room-1"),
        ("dlq", "list"),
        ("dlq", "list", "--json"),
        ("dlq", "replay", "--yes"),
        ("migrate",),
    ],
    ids=" ".join,
)
def test_postgres_down(args: tuple[str, ...], down: dict[str, str]) -> None:
    result = run(*args, env=down)
    where = down["INTURN_POSTGRES_DSN"].removeprefix("postgresql://inturn@")
    assert_one_line_failure(result, f"PostgreSQL at {where}", "check INTURN_POSTGRES_DSN")


@pytest.mark.parametrize(
    "args",
    [("pubsub", "setup"), ("produce", "--rooms", "2", "--messages", "4", "--to", "pubsub", "--pubsub-topic", "t")],
    ids=" ".join,
)
def test_pubsub_down(args: tuple[str, ...], down: dict[str, str]) -> None:
    result = run(*args, env=down)
    assert_one_line_failure(result, "Pub/Sub emulator at " + down["PUBSUB_EMULATOR_HOST"], "check PUBSUB_EMULATOR_HOST")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("report", "--from", "2026-11-02", "--to", "2026-11-01"), "--to (2026-11-01) must be after --from"),
        (("report", "--from", "2026-11-02", "--to", "2026-11-02"), "must be after --from"),
        (("report", "--from", "yesterday", "--to", "2026-11-02"), "not a time: 'yesterday'"),
        (("produce", "--rooms", "2", "--messages", "4", "--platform", "nosuch"), "--platform 'nosuch' is not one of"),
        (("produce", "--rooms", "2", "--messages", "4", "--rate", "0"), "--rate must be above 0"),
        (("produce", "--rooms", "2"), "give --rooms and --messages, or --pattern"),
        (("produce", "--to", "nowhere"), "invalid choice: 'nowhere'"),
        (("rooms", "show"), "the following arguments are required: ROOM"),
        (("dlq", "list", "--limit", "many"), "invalid int value: 'many'"),
        (("config", "check", "nosuch"), "invalid choice: 'nosuch'"),
        (("completion", "fish"), "invalid choice: 'fish'"),
        (("nosuch",), "invalid choice: 'nosuch'"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else "",
)
def test_bad_arguments_are_refused_before_any_service_is_tried(
    args: tuple[str, ...], needle: str, down: dict[str, str]
) -> None:
    """With every service down, a bad argument is still reported (not a service's absence), at once."""
    result = run(*args, env=down)
    assert_one_line_failure(result, needle)
    for service in ("Kafka", "PostgreSQL", "Pub/Sub", "Spark"):
        assert service not in result.err


def test_an_invalid_setting_is_one_line_naming_the_variable(down: dict[str, str]) -> None:
    result = run("topics", "check", env={**down, "INTURN_TOPIC_PARTITIONS": "0"})
    assert_one_line_failure(result, "configuration error", "INTURN_TOPIC_PARTITIONS")


@pytest.fixture(scope="module")
def silent() -> Iterator[dict[str, str]]:
    """An environment whose services accept the TCP connection and then never answer (a listening socket nobody
    reads: the kernel completes the handshake), so the clients' own timeouts are what ends the wait."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        address = f"127.0.0.1:{sock.getsockname()[1]}"
        yield clean_env(
            INTURN_KAFKA_BOOTSTRAP=address,
            INTURN_POSTGRES_DSN=f"postgresql://inturn@{address}/inturn",
            PUBSUB_EMULATOR_HOST=address,
        )


@pytest.mark.parametrize(
    ("args", "service"),
    [
        (("topics", "check"), "Kafka at "),
        (("produce", "--rooms", "2", "--messages", "4"), "Kafka at "),
        (("dlq", "list"), "PostgreSQL at "),
        (("pubsub", "setup"), "Pub/Sub emulator at "),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else "",
)
def test_a_service_that_never_answers(args: tuple[str, ...], service: str, silent: dict[str, str]) -> None:
    assert_one_line_failure(run(*args, env=silent), service)


def test_dev_env_without_a_stack(tmp_path: Path) -> None:
    result = run("dev", "env", env=clean_env(INTURN_STATE_DIR=str(tmp_path)))
    assert_one_line_failure(result, "no detached stack is up", "inturn dev up --detach")


def test_dev_env_json(tmp_path: Path) -> None:
    dsn = "postgresql://inturn@127.0.0.1:15432/inturn"
    state = StackState("127.0.0.1:19092", 1, "k", dsn, "p", "127.0.0.1:18085", 2, "s")
    save_state(state, tmp_path / "devstack.json")
    result = run("dev", "env", "--json", env=clean_env(INTURN_STATE_DIR=str(tmp_path)))
    assert (result.code, result.err) == (0, "")
    assert json.loads(result.out) == {
        "INTURN_KAFKA_BOOTSTRAP": "127.0.0.1:19092",
        "INTURN_POSTGRES_DSN": dsn,
        "PUBSUB_EMULATOR_HOST": "127.0.0.1:18085",
    }
