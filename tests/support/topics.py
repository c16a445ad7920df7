"""Reading a topic back in a test, and pointing the CLI at the test's broker."""

from __future__ import annotations

import pytest

from inturn.settings import KafkaSettings
from inturn_devtools.reading import Record, reading


def read_records(settings: KafkaSettings, topic: str, expect: int | None = None, timeout: float = 20.0) -> list[Record]:
    """The records of ``topic``: read until ``expect`` records came (or, without it, until the topic was quiet for
    1 s); past ``timeout``, what was read (the caller asserts on it)."""
    with reading(settings, topic) as reader:
        try:
            if expect is None:
                reader.settle(quiet=1.0, within=timeout)
            else:
                reader.at_least(expect, timeout)
        except TimeoutError:
            pass  # the caller asserts on what was read
        return list(reader.records)


def read_topic(settings: KafkaSettings, topic: str, expect: int | None = None, timeout: float = 20.0) -> list[bytes]:
    """The record values of ``topic`` (``read_records``)."""
    return [record.value for record in read_records(settings, topic, expect, timeout)]


def cli_on(settings: KafkaSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI run in this test talks to ``settings``' broker and messages topic."""
    monkeypatch.setenv("INTURN_KAFKA_BOOTSTRAP", settings.kafka_bootstrap)
    monkeypatch.setenv("INTURN_TOPIC_MESSAGES", settings.topic_messages)
