"""The pipeline end to end, as separate processes, judged from the simulator's receipt log."""

from __future__ import annotations

import pytest

from inturn_devtools.pipeline import Pipeline
from tests.durability.conftest import wait_done, wait_received

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


def test_two_workers_deliver_every_room_in_order_with_10_percent_of_callbacks_lost(pipeline: Pipeline) -> None:
    pipeline.add_worker("w1")
    pipeline.add_worker("w2")
    total = pipeline.produce(rooms=200, per_room=5)
    wait_done(pipeline, total, within=120)
    report = pipeline.report()
    print("receipt check:", report.summary(worst=0).splitlines()[0])
    assert (report.lost, report.reordered, report.duplicated, report.unexpected) == (0, 0, 0, 0), report.summary()


def test_a_third_worker_joins_mid_run_and_one_leaves_without_loss_reorder_or_duplicates(pipeline: Pipeline) -> None:
    pipeline.add_worker("w1")
    pipeline.add_worker("w2")
    total = pipeline.produce(rooms=300, per_room=8)
    received = 0
    while received < total // 4:
        received = len(pipeline.receipts())
    pipeline.add_worker("w3")
    while received < total // 2:
        received = len(pipeline.receipts())
    assert pipeline.workers["w1"].stop() == 0  # leaves cleanly: drains, checkpoints, commits
    wait_done(pipeline, total, within=180)
    report = pipeline.report()
    print("receipt check:", report.summary(worst=0).splitlines()[0])
    assert (report.lost, report.reordered, report.unexpected) == (0, 0, 0), report.summary()
    assert report.duplicated == 0, report.summary()


def test_a_partition_paused_by_backpressure_that_comes_back_after_a_rebalance_is_read_again(pipeline: Pipeline) -> None:
    # Low watermarks: every partition is paused almost all the time, so the ones that move are paused when they go.
    small = {"INTURN_WORKER_HIGH_WATERMARK": "40", "INTURN_WORKER_LOW_WATERMARK": "10"}
    pipeline.add_worker("w1", **small)
    total = pipeline.produce(rooms=200, per_room=10)
    wait_received(pipeline, total // 10)
    pipeline.add_worker("w2", **small)  # takes some of w1's partitions...
    pipeline.wait_balanced()
    wait_received(pipeline, total // 4)
    assert pipeline.workers["w2"].stop() == 0  # ...which come back to w1, paused by librdkafka if nobody resumes
    wait_done(pipeline, total, within=180)
    report = pipeline.report()
    assert (report.lost, report.reordered, report.unexpected) == (0, 0, 0), report.summary()
    assert report.duplicated == 0, report.summary()
