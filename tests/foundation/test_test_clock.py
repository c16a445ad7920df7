"""The test clock (``INTURN_TEST_CLOCK_OFFSET_MS``): one service's wall clock minutes apart from the others' for the
clock rows of the fault matrix (tests/chaos/test_clock_faults.py), and refused by every production service."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic_settings import BaseSettings

from inturn import schemas
from inturn.errors import ConfigError
from inturn.kafka import AsyncProducer
from inturn.settings import load
from inturn.settings.webhook import WebhookSettings
from tests.cli.harness import clean_env as cli_env
from tests.cli.harness import run
from tests.platforms.test_adapter_send import _send_once
from tests.platforms.wire import chunked
from tests.security.test_settings_strict import REAL, clean_env  # noqa: F401 - clean_env is a fixture used below

TWO_MINUTES_MS = 120_000


@pytest.fixture
def host_clock() -> Iterator[None]:
    """The process's clock back on the host's after the test."""
    yield
    schemas.set_test_clock_offset(0)


@pytest.mark.parametrize("cls", list(REAL), ids=lambda c: c.__name__)
@pytest.mark.parametrize("offset", ["120000", "-120000", "0"])
def test_every_production_service_refuses_a_test_clock_naming_the_variable(
    clean_env: pytest.MonkeyPatch,  # noqa: F811 - the fixture imported above
    host_clock: None,
    cls: type[BaseSettings],
    offset: str,
) -> None:
    clean_env.setenv("INTURN_ENVIRONMENT", "production")
    clean_env.setenv("INTURN_TEST_CLOCK_OFFSET_MS", offset)
    with pytest.raises(ConfigError, match="INTURN_TEST_CLOCK_OFFSET_MS: a test clock; not allowed in production"):
        load(cls, **REAL[cls])
    assert schemas.clock_offset_ms() == 0  # refused before anything was applied
    clean_env.delenv("INTURN_TEST_CLOCK_OFFSET_MS")
    settings: Any = load(cls, **REAL[cls])  # the same service without it starts
    assert settings.environment == "production"


def test_a_production_webhook_process_exits_at_start_with_a_test_clock() -> None:
    credentials = {f"INTURN_{name.upper()}": value for name, value in REAL[_webhook_settings()].items()}
    env = cli_env(INTURN_ENVIRONMENT="production", INTURN_TEST_CLOCK_OFFSET_MS="-120000", **credentials)
    result = run("webhook", env=env, timeout=60)
    assert result.code == 1, result.err
    assert "INTURN_TEST_CLOCK_OFFSET_MS: a test clock; not allowed in production" in result.err


@pytest.mark.parametrize("offset_ms", [TWO_MINUTES_MS, -TWO_MINUTES_MS])
def test_outside_production_the_loaded_offset_moves_the_services_wall_clock(
    clean_env: pytest.MonkeyPatch,  # noqa: F811 - the fixture imported above
    host_clock: None,
    offset_ms: int,
) -> None:
    clean_env.setenv("INTURN_ENVIRONMENT", "test")
    clean_env.setenv("INTURN_TEST_CLOCK_OFFSET_MS", str(offset_ms))
    load(_webhook_settings(), **REAL[_webhook_settings()])
    before = time.time_ns() // 1_000_000
    shifted = schemas.now_ms()
    after = time.time_ns() // 1_000_000
    assert before + offset_ms <= shifted <= after + offset_ms
    assert schemas.clock_offset_ms() == offset_ms


def test_without_the_setting_the_clock_is_the_hosts(
    clean_env: pytest.MonkeyPatch,  # noqa: F811 - the fixture imported above
    host_clock: None,
) -> None:
    schemas.set_test_clock_offset(5_000)  # left by someone else: a load without the setting does not touch it
    load(_webhook_settings(), **REAL[_webhook_settings()])
    assert schemas.clock_offset_ms() == 5_000
    schemas.set_test_clock_offset(0)
    before = time.time_ns() // 1_000_000
    assert before <= schemas.now_ms() <= time.time_ns() // 1_000_000


def _webhook_settings() -> type[BaseSettings]:
    return WebhookSettings


async def test_a_send_under_the_test_clock_is_stamped_with_the_services_clock(host_clock: None) -> None:
    """The worker's send times (compared with Messenger's watermarks) come from the same clock as ``now_ms``."""
    schemas.set_test_clock_offset(-TWO_MINUTES_MS)
    host_before = time.time_ns() // 1_000_000
    result = await _send_once(chunked(200, b'{"messages":[{"id":', b'"wamid.XYZ"}]}'))
    host_after = time.time_ns() // 1_000_000
    sent_at = getattr(result, "sent_at_ms", None)
    assert sent_at is not None, result
    assert host_before - TWO_MINUTES_MS <= sent_at <= host_after - TWO_MINUTES_MS


class _Producer:
    """Records what ``produce`` was given (a stand-in for confluent_kafka's)."""

    def __init__(self) -> None:
        self.timestamps: list[int] = []

    def produce(self, topic: str, **kwargs: Any) -> None:
        self.timestamps.append(kwargs.get("timestamp", 0))

    def poll(self, timeout: float) -> int:
        return 0


@pytest.mark.parametrize("offset_ms", [0, TWO_MINUTES_MS, -TWO_MINUTES_MS])
async def test_records_are_stamped_by_the_test_clock_and_left_to_librdkafka_without_one(
    host_clock: None, offset_ms: int
) -> None:
    schemas.set_test_clock_offset(offset_ms)
    fake = _Producer()
    producer = AsyncProducer(fake)  # type: ignore[arg-type]  # only produce and poll are called
    host_before = time.time_ns() // 1_000_000
    producer.produce_then("acks", b"{}", lambda err, msg: None)
    host_after = time.time_ns() // 1_000_000
    (stamp,) = fake.timestamps
    if offset_ms == 0:
        assert stamp == 0  # librdkafka's own CreateTime: the host's clock
    else:
        assert host_before + offset_ms <= stamp <= host_after + offset_ms
