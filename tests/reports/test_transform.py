"""The transforms against a plain-Python oracle over a generated event set."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from inturn.schemas import Ack, AckStatus, Event, EventType, OrderingMode
from inturn_reports import transform
from inturn_reports.transform import CountedRows, ReportParams
from inturn_reports.transform.facts import room_rows
from tests.reports import fixture, oracle
from tests.reports.conftest import acks_frame, assert_same_rows, events_frame
from tests.reports.generator import generate

pytestmark = pytest.mark.spark

START = 1_790_200_800_000  # 2026-09-23 22:00 UTC: the 4 h range crosses midnight, so two dates
SPAN = 4 * 3_600_000


Tables = tuple[pa.Table, CountedRows]


def _tables(spark: SparkSession, events: list[Event], acks: list[Ack], params: ReportParams) -> Tables:
    """The rooms table and the counts, as the job brings them to the driver."""
    return transform.split(transform.room_pass(events_frame(spark, events), acks_frame(spark, acks), params).toArrow())


@pytest.fixture(scope="module", params=["with dispatched events", "terminal events only"])
def generated(spark: SparkSession, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The generated set in each shape of the worker's events: every oracle comparison runs over both."""
    dispatched = request.param == "with dispatched events"
    stream = generate(seed=7, rooms=48, messages_per_room=6, start_ms=START, span_ms=SPAN, dispatched_events=dispatched)
    # The range cuts off messages at both ends: those first seen before from or after to are not reported.
    params = ReportParams(from_ms=START + 600_000, to_ms=START + SPAN - 600_000, top_n=5, timeline_bucket_ms=900_000)
    msgs = oracle.messages(stream.events, stream.acks, params.from_ms, params.to_ms)
    rooms, counts = _tables(spark, stream.events, stream.acks, params)
    return {"params": params, "msgs": msgs, "rooms": rooms, "counts": counts, "dispatched": dispatched}


def test_the_generated_set_meets_every_outcome(generated: dict[str, Any]) -> None:
    # Guards the oracle comparisons below against a generator that stopped producing some case.
    rows = oracle.summary(generated["msgs"])
    totals = {k: sum(r[k] or 0 for r in rows) for k in ("ack_timeouts", "late_acks", "retries", "dead_letters",
                                                    "skipped_duplicates", "no_device_ts", "inverted", "failed",
                                                    "sent_unacked", "dispatched", "duplicates")}  # fmt: skip
    # A re-send shows as a second dispatched event only: with terminal events alone it cannot be seen.
    duplicates = totals.pop("duplicates")
    assert duplicates > 0 if generated["dispatched"] else duplicates == 0
    assert all(v > 0 for v in totals.values()), totals
    assert len({r["date"] for r in rows}) == 2
    assert {r["mode"] for r in rows} == {"ack", "none", "fixed-delay", "partition"}


def test_summary_counts_rates_and_percentiles_match_the_oracle(spark: SparkSession, generated: dict[str, Any]) -> None:
    actual = transform.summary(generated["counts"])
    assert_same_rows(actual, oracle.summary(generated["msgs"]))


def test_rooms_table_matches_the_oracle(spark: SparkSession, generated: dict[str, Any]) -> None:
    expected = oracle.rooms(generated["msgs"])
    assert len(expected) > 40  # every room of the 48, some on both dates
    assert_same_rows(generated["rooms"], expected)


def test_worst_rooms_are_the_oracles_top_n_per_day_and_measure(generated: dict[str, Any]) -> None:
    params = generated["params"]
    actual = transform.worst_rooms(generated["rooms"], params.top_n)
    expected = oracle.worst_rooms(oracle.rooms(generated["msgs"]), params.top_n)
    assert len(expected) > 10
    assert_same_rows(actual, expected)


def test_timeline_and_latency_histogram_match_the_oracle(generated: dict[str, Any]) -> None:
    params = generated["params"]
    counts = generated["counts"]
    assert_same_rows(transform.timeline(counts), oracle.timeline(generated["msgs"], params.timeline_bucket_ms))
    assert_same_rows(transform.latency_histogram(counts), oracle.latency_histogram(generated["msgs"]))


def test_platforms_table_matches_the_oracle(generated: dict[str, Any]) -> None:
    actual = transform.platforms(generated["counts"])
    assert_same_rows(actual, oracle.platforms(generated["msgs"]))


def test_no_events_gives_empty_tables(spark: SparkSession) -> None:
    params = ReportParams(from_ms=0, to_ms=1)
    rooms, counts = _tables(spark, [], [], params)
    for table in (transform.summary(counts), transform.timeline(counts), transform.platforms(counts)):
        assert table.num_rows == 0
    assert rooms.num_rows == transform.worst_rooms(rooms, params.top_n).num_rows == 0


def test_hand_checked_rooms_give_the_out_of_order_rates_worked_out_by_hand(spark: SparkSession) -> None:
    stream = fixture.hand_fixture(START)
    params = ReportParams(from_ms=START, to_ms=START + 10_000)
    rooms, counts = _tables(spark, stream.events, stream.acks, params)
    room_cols = ["room_id", "pairs", "inverted", "out_of_order_rate", "ack_timeouts", "late_acks", "dead_letters",
                 "dispatch_violations"]  # fmt: skip
    expected_rooms = [dict(zip(room_cols, (room, *vals), strict=True)) for room, vals in fixture.ROOMS.items()]
    assert_same_rows(rooms, expected_rooms, room_cols)
    group_cols = ["platform", "mode", "messages", "pairs", "inverted", "out_of_order_rate", "ack_timeouts",
                  "late_acks", "no_device_ts", "dispatch_violations"]  # fmt: skip
    expected_groups = [dict(zip(group_cols, (*key, *vals), strict=True)) for key, vals in fixture.GROUPS.items()]
    assert_same_rows(transform.summary(counts), expected_groups, group_cols)


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
    rooms, counts = _tables(spark, events, [], params)
    got = {r["platform"]: (r["acked"], r["ack_p50_ms"], r["e2e_p50_ms"]) for r in transform.summary(counts).to_pylist()}
    assert got == {"telegram": (1, 240.0, 340.0), "whatsapp": (1, None, None)}
    assert {r["room_id"]: r["e2e_p95_ms"] for r in rooms.to_pylist()} == {"tg-room": 340.0, "wa-room": None}


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
    rooms, counts = _tables(spark, events, acks, params)
    # Each message's first ack is its own room's delivery, received 5 ms after it (the rooms' end-to-end latency,
    # from creation at START); both messages reached the device. Room C has no message: its ack counts nowhere.
    got = {r["room_id"]: r["e2e_p95_ms"] for r in rooms.to_pylist()}
    assert got == {"room-a": 405.0, "room-b": 905.0}
    assert [(r["delivered"], r["no_device_ts"]) for r in transform.summary(counts).to_pylist()] == [(2, 0)]


def test_a_message_reaching_the_device_at_the_same_moment_as_the_one_before_is_not_inverted(
    spark: SparkSession,
) -> None:
    # "Inverted" is strictly earlier (docs/reports.md, Definitions): m2 reaches the device with m1, m3 before them.
    def sent(message: str, offset: int) -> Event:
        return Event(
            type=EventType.SENT, room_id="tie", message_id=message, platform="whatsapp", partition=0, offset=offset,
            worker_id="w1", mode=OrderingMode.NONE, ts_ms=START + offset, created_at_ms=START,
            sent_at_ms=START + offset, platform_message_id=f"wamid.{message}",
        )  # fmt: skip

    def delivered(message: str, at: int) -> Ack:
        return Ack(
            room_id="tie", message_id=message, platform="whatsapp", platform_message_id=f"wamid.{message}",
            status=AckStatus.DELIVERED, platform_ts_ms=at, received_at_ms=at + 5,
        )  # fmt: skip

    events = [sent("m1", 0), sent("m2", 1), sent("m3", 2)]
    acks = [delivered("m1", START + 500), delivered("m2", START + 500), delivered("m3", START + 499)]
    rooms, _ = _tables(spark, events, acks, ReportParams(from_ms=START, to_ms=START + 10_000))
    assert [(r["pairs"], r["inverted"], r["out_of_order_rate"]) for r in rooms.to_pylist()] == [(2, 1, 0.5)]


def test_events_and_acks_are_shuffled_once_by_room_and_the_acks_read_once(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    # docs/reports.md, "The plan": one exchange, by room, of the events and all the acks (those known only by
    # platform message id included); the pass over each room does the rest in the room's partition.
    stream = generate(seed=3, rooms=4, messages_per_room=3, start_ms=START, span_ms=SPAN)
    rows = room_rows(events_frame(spark, stream.events), acks_frame(spark, stream.acks))
    capsys.readouterr()
    rows.explain()  # the physical plan, on stdout (public API, classic and Spark Connect)
    plan = capsys.readouterr().out
    exchanges = [line.strip() for line in plan.splitlines() if "Exchange " in line]
    assert len(exchanges) == 1, plan
    assert "hashpartitioning(room_id#" in exchanges[0], exchanges
