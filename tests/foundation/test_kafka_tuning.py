"""The Kafka clients' tuning settings reach the clients: producers' compression, and the fetch settings of the
worker's messages consumer and acks reader (issue 42; measured in benchmarks/bench_pipeline.py)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from inturn.kafka import producer_config
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_worker import ack_reader


def test_producers_compress_as_the_setting_says() -> None:
    assert producer_config(KafkaSettings())["compression.type"] == "lz4"
    assert producer_config(KafkaSettings(kafka_compression="zstd"))["compression.type"] == "zstd"
    with pytest.raises(ValidationError, match="kafka_compression"):
        KafkaSettings(kafka_compression="brotli")


def test_message_producers_linger_as_the_setting_says(monkeypatch: pytest.MonkeyPatch) -> None:
    assert producer_config(KafkaSettings(kafka_linger_ms=40))["linger.ms"] == 40
    monkeypatch.setenv("INTURN_KAFKA_LINGER_MS", "7")
    assert producer_config(KafkaSettings())["linger.ms"] == 7
    # A producer of its own (the worker's events, the webhook's acks) still sets its own.
    assert producer_config(KafkaSettings(), **{"linger.ms": 50})["linger.ms"] == 50
    with pytest.raises(ValidationError, match="kafka_linger_ms"):
        KafkaSettings(kafka_linger_ms=-1)


def test_the_acks_reader_fetches_as_its_settings_say(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    def fake_consumer(settings: KafkaSettings, group_id: str, **overrides: Any) -> object:
        made.append(overrides)
        return object()

    monkeypatch.setattr(ack_reader, "make_consumer", fake_consumer)
    settings = WorkerSettings(worker_acks_fetch_wait_max_ms=7, worker_acks_fetch_min_bytes=4096)
    ack_reader.AckReader(settings, router=None, events=None)  # type: ignore[arg-type]  # not used by the constructor
    assert made[0]["fetch.wait.max.ms"] == 7
    assert made[0]["fetch.min.bytes"] == 4096


@pytest.mark.parametrize("field", ["worker_fetch_wait_max_ms", "worker_fetch_min_bytes", "worker_acks_fetch_min_bytes"])
def test_fetch_settings_out_of_range_are_refused(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        WorkerSettings.model_validate({field: -1})
