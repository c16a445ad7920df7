"""``job.build_tables``: the facts' cache is built while the tables are planned, and stopped if planning fails."""

from __future__ import annotations

import pytest
from pyspark import SparkContext
from pyspark.sql import SparkSession

from inturn_reports import job
from inturn_reports.transform import ReportParams
from tests.reports import oracle
from tests.reports.conftest import acks_frame, events_frame
from tests.reports.generator import generate

pytestmark = pytest.mark.spark

START = 1_790_200_800_000  # 2026-09-23 22:00 UTC
SPAN = 3_600_000
PARAMS = ReportParams(from_ms=START, to_ms=START + SPAN)


def test_the_facts_cache_is_built_in_the_background_in_its_job_group(spark: SparkSession) -> None:
    stream = generate(seed=11, rooms=8, messages_per_room=4, start_ms=START, span_ms=SPAN)
    expected = len(oracle.messages(stream.events, stream.acks, PARAMS.from_ms, PARAMS.to_ms))
    built = job.build_tables(events_frame(spark, stream.events), acks_frame(spark, stream.acks), PARAMS)
    try:
        # The background job's result is the number of messages, and its jobs are the group that a failure cancels.
        assert built.facts_cached.result(timeout=120) == expected > 0
        assert spark.sparkContext.statusTracker().getJobIdsForGroup(job.FACTS_JOB_GROUP)
    finally:
        built.release()


def test_a_failure_to_plan_the_tables_cancels_the_facts_and_is_raised(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = generate(seed=12, rooms=4, messages_per_room=3, start_ms=START, span_ms=SPAN)
    cancelled: list[str] = []
    real_cancel = SparkContext.cancelJobGroup

    def cancel(self: SparkContext, group_id: str) -> None:
        cancelled.append(group_id)
        real_cancel(self, group_id)

    def fail(*_: object) -> None:
        raise RuntimeError("the rooms table could not be planned")

    monkeypatch.setattr(SparkContext, "cancelJobGroup", cancel)
    monkeypatch.setattr(job, "rooms", fail)
    with pytest.raises(RuntimeError, match="could not be planned"):
        job.build_tables(events_frame(spark, stream.events), acks_frame(spark, stream.acks), PARAMS)
    assert cancelled == [job.FACTS_JOB_GROUP]
