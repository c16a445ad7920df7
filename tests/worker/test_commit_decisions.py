"""Commit decisions between the checkpoint task (on the loop) and the consumer thread's turn that sends them.

The consumer thread's turn can block for seconds inside a rebalance callback while checkpoint rounds go on
deciding. Every offset a round decided must reach a commit: a partition whose decision was dropped is recorded
as committed and never committed again, so its group offset stays behind for good (seen as a rolling restart
that never finished committing)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import TopicPartition

from inturn.settings.worker import WorkerSettings
from inturn_worker.intake import Intake
from inturn_worker.partition import Partition

TOPIC = "inturn.messages"


@pytest.fixture
def parts() -> dict[int, Partition]:
    return {p: Partition(p, lease_s=60) for p in (0, 1)}


@pytest.fixture
def intake(parts: dict[int, Partition]) -> Iterator[Intake]:
    settings = WorkerSettings(topic_messages=TOPIC, kafka_bootstrap="127.0.0.1:9")  # never polled
    # The commit bookkeeping reads only the settings and the partitions: rooms, events, store, acks and the
    # checkpoint are not reached.
    intake = Intake(settings, parts, None, None, None, None, None)  # type: ignore[arg-type]
    yield intake
    intake._consumer.close()


def _offsets(tps: list[TopicPartition]) -> dict[int, int]:
    return {tp.partition: tp.offset for tp in tps}


def test_a_second_round_before_the_thread_sends_keeps_the_first_rounds_offsets(intake: Intake) -> None:
    intake._decide_commits({0: 10})
    intake._decide_commits({0: 10, 1: 5})  # partition 0 has not moved since: nothing new for it
    assert _offsets(intake._take_commits()) == {0: 10, 1: 5}
    assert intake._take_commits() == []


def test_a_later_offset_replaces_an_unsent_one(intake: Intake) -> None:
    intake._decide_commits({0: 10})
    intake._decide_commits({0: 12})
    assert _offsets(intake._take_commits()) == {0: 12}


def test_a_revoke_takes_the_unsent_offsets_of_its_partitions_only(intake: Intake) -> None:
    intake._decide_commits({0: 10, 1: 5})
    assert _offsets(intake._take_commits({0})) == {0: 10}
    assert _offsets(intake._take_commits()) == {1: 5}
