"""Commit decisions between the checkpoint task (on the loop) and the consumer thread's turn that sends them.

The consumer thread's turn can block for seconds inside a rebalance callback while checkpoint rounds go on
deciding. Every offset a round decided must reach a commit: a partition whose decision was dropped is recorded
as committed and never committed again, so its group offset stays behind for good (seen as a rolling restart
that never finished committing)."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from inturn_worker.checkpoint import Commits
from inturn_worker.partition import Partition

TOPIC = "inturn.messages"


@pytest.fixture
def parts() -> dict[int, Partition]:
    return {p: Partition(p, lease_s=60) for p in (0, 1)}


@pytest.fixture
def commits() -> Commits:
    return Commits(TOPIC)


def _offsets(tps: list[TopicPartition]) -> dict[int, int]:
    return {tp.partition: tp.offset for tp in tps}


def test_a_second_round_before_the_thread_sends_keeps_the_first_rounds_offsets(
    commits: Commits, parts: dict[int, Partition]
) -> None:
    commits.decide(parts, {0: 10})
    commits.decide(parts, {0: 10, 1: 5})  # partition 0 has not moved since: nothing new for it
    assert _offsets(commits.take()) == {0: 10, 1: 5}
    assert commits.take() == []


def test_a_later_offset_replaces_an_unsent_one(commits: Commits, parts: dict[int, Partition]) -> None:
    commits.decide(parts, {0: 10})
    commits.decide(parts, {0: 12})
    assert _offsets(commits.take()) == {0: 12}


def test_a_revoke_takes_the_unsent_offsets_of_its_partitions_only(
    commits: Commits, parts: dict[int, Partition]
) -> None:
    commits.decide(parts, {0: 10, 1: 5})
    assert _offsets(commits.take({0})) == {0: 10}
    assert _offsets(commits.take()) == {1: 5}
