"""librdkafka's own log lines go through structlog (confluent-kafka's ``logger`` setting), rate-limited per
facility, instead of raw ``%3|...|FAIL|...`` lines on stderr beside the JSON logs."""

from __future__ import annotations

import logging

import pytest
import structlog
from structlog.testing import capture_logs

import inturn.kafka
from inturn.kafka import LibrdkafkaLogs, make_producer
from inturn.settings import KafkaSettings
from inturn_devtools.waiting import wait_until


@pytest.fixture(autouse=True)
def fresh_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's logger, not yet bound (a logger caches its processors on first use)."""
    monkeypatch.setattr(inturn.kafka, "_client_log", structlog.get_logger("inturn.kafka.client"))


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _record(facility: str, text: str, level: int = logging.ERROR) -> logging.LogRecord:
    """A record as confluent-kafka makes it: ``logger.log(level, "%s [%s] %s", facility, client, text)``."""
    return logging.LogRecord(
        "inturn.kafka.librdkafka", level, __file__, 0, "%s [%s] %s", (facility, "rdkafka#c-1", text), None
    )


def test_each_facility_writes_a_few_lines_per_window_and_the_next_one_says_how_many_were_dropped() -> None:
    clock = _Clock()
    handler = LibrdkafkaLogs(burst=3, window_s=10.0, clock=clock)
    with capture_logs() as logs:
        for n in range(10):
            handler.emit(_record("FAIL", f"connect failed {n}"))
        handler.emit(_record("REQTMOUT", "timed out", logging.WARNING))  # another facility has its own limit
        clock.now += 10.0
        handler.emit(_record("FAIL", "connect failed 10"))
    assert [(e["facility"], e["detail"], e.get("suppressed"), e["log_level"]) for e in logs] == [
        ("FAIL", "connect failed 0", None, "error"),
        ("FAIL", "connect failed 1", None, "error"),
        ("FAIL", "connect failed 2", None, "error"),
        ("REQTMOUT", "timed out", None, "warning"),
        ("FAIL", "connect failed 10", 7, "error"),
    ]
    assert {e["event"] for e in logs} == {"kafka_client_log"}
    assert {e["client"] for e in logs} == {"rdkafka#c-1"}


def test_a_client_that_cannot_reach_kafka_logs_through_structlog_not_to_stderr(
    capfd: pytest.CaptureFixture[str],
) -> None:
    producer = make_producer(KafkaSettings(kafka_bootstrap="127.0.0.1:9"))  # nothing listens on the discard port
    with capture_logs() as logs:
        wait_until(
            lambda: producer.poll(0.05) >= 0 and any(e["event"] == "kafka_client_log" for e in logs),
            10,
            "librdkafka's connection failure logged",
            every=0,
        )
    failures = [e for e in logs if e["event"] == "kafka_client_log" and e["facility"] == "FAIL"]
    assert failures, logs
    assert "127.0.0.1:9" in failures[0]["detail"]
    assert "|FAIL|" not in capfd.readouterr().err
