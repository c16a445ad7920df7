"""The transforms against a plain-Python oracle over a generated event set."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from inturn.schemas import Ack, AckStatus, Event, EventType, OrderingMode
from inturn_reports.extract import EVENT_SCHEMA
from inturn_reports.transform import (
    CountedRows,
    ReportParams,
    collect,
    conform,
    counted,
    latency_histogram,
    message_facts,
    platforms,
    rooms,
    summary,
    timeline,
    worst_rooms,
)
from tests.reports import fixture, oracle
from tests.reports.conftest import acks_frame, assert_same_rows, events_frame
from tests.reports.generator import generate

pytestmark = pytest.mark.spark

START = 1_790_200_800_000  # 2026-09-23 22:00 UTC: the 4 h range crosses midnight, so two dates
SPAN = 4 * 3_600_000


def _expected(spark: SparkSession, actual: DataFrame, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame([tuple(r[c] for c in actual.columns) for r in rows], actual.schema)


@pytest.fixture(scope="module", params=["with dispatched events", "terminal events only"])
def generated(spark: SparkSession, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The generated set in each shape of the worker's events: every oracle comparison runs over both."""
    dispatched = request.param == "with dispatched events"
    stream = generate(seed=7, rooms=48, messages_per_room=6, start_ms=START, span_ms=SPAN, dispatched_events=dispatched)
    # The range cuts off messages at both ends: those first seen before from or after to are not reported.
    params = ReportParams(from_ms=START + 600_000, to_ms=START + SPAN - 600_000, top_n=5, timeline_bucket_ms=900_000)
    msgs = oracle.messages(stream.events, stream.acks, params.from_ms, params.to_ms)
    facts = message_facts(events_frame(spark, stream.events), acks_frame(spark, stream.acks), params).cache()
    return {"params": params, "msgs": msgs, "facts": facts, "dispatched": dispatched}


def _counts(facts: DataFrame, params: ReportParams) -> CountedRows:
    """The counts the small tables are summed from, on the driver as the job brings them."""
    return collect(counted(facts, params))


def test_the_generated_set_meets_every_outcome(generated: dict[str, Any]) -> None:
    # Guards the oracle comparisons below against a generator that stopped producing some case.
    rows = oracle.summary(generated["msgs"])
    totals = {k: sum(r[k] for r in rows) for k in ("ack_timeouts", "late_acks", "retries", "dead_letters",
                                                    "skipped_duplicates", "no_device_ts", "inverted", "failed",
                                                    "sent_unacked", "dispatched", "duplicates")}  # fmt: skip
    # A re-send shows as a second dispatched event only: with terminal events alone it cannot be seen.
    duplicates = totals.pop("duplicates")
    assert duplicates > 0 if generated["dispatched"] else duplicates == 0
    assert all(v > 0 for v in totals.values()), totals
    assert len({r["date"] for r in rows}) == 2
    assert {r["mode"] for r in rows} == {"ack", "none", "fixed-delay", "partition"}


def test_summary_counts_rates_and_percentiles_match_the_oracle(spark: SparkSession, generated: dict[str, Any]) -> None:
    actual = summary(_counts(generated["facts"], generated["params"]))
    assert_same_rows(actual, oracle.summary(generated["msgs"]))


def test_rooms_table_matches_the_oracle(spark: SparkSession, generated: dict[str, Any]) -> None:
    actual = rooms(generated["facts"], generated["params"])
    assertDataFrameEqual(actual, _expected(spark, actual, oracle.rooms(generated["msgs"])))


def test_worst_rooms_are_the_oracles_top_n_per_day_and_measure(generated: dict[str, Any]) -> None:
    params = generated["params"]
    actual = worst_rooms(conform("rooms", rooms(generated["facts"], params).toArrow()), params.top_n)
    expected = oracle.worst_rooms(oracle.rooms(generated["msgs"]), params.top_n)
    assert len(expected) > 10
    assert_same_rows(actual, expected)


def test_timeline_and_latency_histogram_match_the_oracle(generated: dict[str, Any]) -> None:
    params = generated["params"]
    counts = _counts(generated["facts"], params)
    assert_same_rows(timeline(counts), oracle.timeline(generated["msgs"], params.timeline_bucket_ms))
    assert_same_rows(latency_histogram(counts), oracle.latency_histogram(generated["msgs"]))


def test_platforms_table_matches_the_oracle(generated: dict[str, Any]) -> None:
    actual = platforms(_counts(generated["facts"], generated["params"]))
    assert_same_rows(actual, oracle.platforms(generated["msgs"]))


def test_no_events_gives_empty_tables(spark: SparkSession) -> None:
    empty = spark.createDataFrame([], EVENT_SCHEMA)
    params = ReportParams(from_ms=0, to_ms=1)
    facts = message_facts(empty, acks_frame(spark, []), params)
    counts = _counts(facts, params)
    assert summary(counts).num_rows == timeline(counts).num_rows == platforms(counts).num_rows == 0
    assert worst_rooms(conform("rooms", rooms(facts, params).toArrow()), params.top_n).num_rows == 0


def test_hand_checked_rooms_give_the_out_of_order_rates_worked_out_by_hand(spark: SparkSession) -> None:
    stream = fixture.hand_fixture(START)
    params = ReportParams(from_ms=START, to_ms=START + 10_000)
    facts = message_facts(events_frame(spark, stream.events), acks_frame(spark, stream.acks), params)
    room_cols = ["room_id", "pairs", "inverted", "out_of_order_rate", "ack_timeouts", "late_acks", "dead_letters",
                 "dispatch_violations"]  # fmt: skip
    actual_rooms = rooms(facts, params).select(*room_cols)
    assertDataFrameEqual(actual_rooms, [(room, *vals) for room, vals in fixture.ROOMS.items()])
    group_cols = ["platform", "mode", "messages", "pairs", "inverted", "out_of_order_rate", "ack_timeouts",
                  "late_acks", "no_device_ts", "dispatch_violations"]  # fmt: skip
    expected_groups = [dict(zip(group_cols, (*key, *vals), strict=True)) for key, vals in fixture.GROUPS.items()]
    assert_same_rows(summary(_counts(facts, params)), expected_groups, group_cols)


def test_a_synchronous_platforms_answer_is_the_first_ack_and_a_callback_platforms_acked_event_is_not(
    spark: SparkSession,
) -> None:
    # Telegram calls nothing back: the worker's acked event (detail "answered") says when the send was answered.
    # A WhatsApp message acked by a callback the report never saw keeps no latency: the ack record is the source.
    created, sent, answered = START, START + 100, START + 340

    def acked(room: str, platform: str, detail: str | None) -> Event:
        return Event(
            type=EventType.ACKED, room_id=room, message_id="m1", platform=platform, partition=0, offset=0,
            worker_id="w1", mode=OrderingMode.ACK, ts_ms=answered, created_at_ms=created, sent_at_ms=sent,
            acked_at_ms=answered, platform_message_id=f"{room}-1", detail=detail,
        )  # fmt: skip

    events = [acked("tg-room", "telegram", "answered"), acked("wa-room", "whatsapp", None)]
    params = ReportParams(from_ms=START, to_ms=START + 10_000)
    facts = message_facts(events_frame(spark, events), acks_frame(spark, []), params)
    got = {
        r["room_id"]: (r["first_ack_received_ms"], r["ack_latency_ms"], r["e2e_latency_ms"], r["acked"])
        for r in facts.collect()
    }
    assert got == {"tg-room": (answered, 240, 340, True), "wa-room": (None, None, None, True)}


def test_an_ack_known_by_platform_message_id_counts_only_for_a_message_of_its_own_room(spark: SparkSession) -> None:
    # The worker matches such an ack in the room the webhook gave it (its partition's ack book); so does the report.
    sent = START + 100

    def send(room: str) -> Event:
        return Event(
            type=EventType.SENT, room_id=room, message_id="m1", platform="whatsapp", partition=0, offset=0,
            worker_id="w1", mode=OrderingMode.NONE, ts_ms=sent, created_at_ms=START, sent_at_ms=sent,
            platform_message_id="wamid.1",
        )  # fmt: skip

    def delivered(room: str, at: int) -> Ack:
        return Ack(
            room_id=room, message_id=None, platform="whatsapp", platform_message_id="wamid.1",
            status=AckStatus.DELIVERED, platform_ts_ms=at, received_at_ms=at + 5,
        )  # fmt: skip

    # Both rooms' sends got the same platform message id; each room's delivery names it, at its own time.
    events = [send("room-a"), send("room-b")]
    acks = [delivered("room-a", START + 400), delivered("room-b", START + 900), delivered("room-c", START + 200)]
    params = ReportParams(from_ms=START, to_ms=START + 10_000)
    facts = message_facts(events_frame(spark, events), acks_frame(spark, acks), params)
    got = {r["room_id"]: (r["device_ts_ms"], r["first_ack_received_ms"]) for r in facts.collect()}
    assert got == {"room-a": (START + 400, START + 405), "room-b": (START + 900, START + 905)}


def test_the_facts_shuffle_only_by_room_twice_and_join_the_acks_known_by_id_in_the_rooms_partition(
    spark: SparkSession,
) -> None:
    # docs/reports.md, "The plan of the facts step": the events with the acks naming their message, and the acks
    # known only by platform message id, each shuffled once by room; no other exchange (the join on (room, id) and
    # the room-order windows run on the room partitioning: session.CO_PARTITIONED).
    stream = generate(seed=3, rooms=4, messages_per_room=3, start_ms=START, span_ms=SPAN)
    params = ReportParams(from_ms=START, to_ms=START + SPAN)
    facts = message_facts(events_frame(spark, stream.events), acks_frame(spark, stream.acks), params)
    plan = facts._jdf.queryExecution().executedPlan().toString()
    exchanges = [line.strip() for line in plan.splitlines() if "Exchange " in line]
    assert len(exchanges) == 2, plan
    assert all("hashpartitioning(room_id#" in line for line in exchanges), exchanges
    assert "ShuffledHashJoin" in plan, plan
    assert "LeftOuter" in plan, plan
