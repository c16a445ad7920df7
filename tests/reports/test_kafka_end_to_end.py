"""End to end: records on real Kafka topics (statuses split between acks and statuses) -> the report job (Kafka
source, batch by timestamp) -> tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from inturn.kafka import make_admin, make_producer
from inturn.schemas import encode, now_ms
from inturn.settings import KafkaSettings
from inturn_reports import extract
from inturn_reports.job import run
from inturn_reports.load import RUNS
from inturn_reports.settings import ReportSettings
from tests.reports import fixture, oracle
from tests.reports.generator import Stream, generate, split_statuses

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

HOUR = 3_600_000


def _produce(settings: KafkaSettings, stream: Stream) -> None:
    """Every record on its topic, key = room_id, Kafka timestamp = the record's own time, in time order; the statuses
    split between the acks and the statuses topics as the webhook splits them (``split_statuses``). The two status
    topics are made to keep the producer's timestamps (``inturn topics create`` gives them the broker's time,
    LogAppendTime): this history is written now but dated hours ago."""
    admin = make_admin(settings)
    create_time = [
        ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry("message.timestamp.type", "CreateTime", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        for topic in (settings.topic_acks, settings.topic_statuses)
    ]
    for future in admin.incremental_alter_configs(create_time).values():
        future.result(30)
    producer = make_producer(settings)
    for event in sorted(stream.events, key=lambda e: e.ts_ms):
        producer.produce(settings.topic_events, encode(event), event.room_id.encode(), timestamp=event.ts_ms)
        producer.poll(0)
    deciding, later = split_statuses(stream.acks)
    assert deciding, "nothing on the acks topic"
    assert later, "nothing on the statuses topic"
    for topic, acks in ((settings.topic_acks, deciding), (settings.topic_statuses, later)):
        for ack in acks:
            producer.produce(topic, encode(ack), ack.room_id.encode(), timestamp=ack.received_at_ms)
            producer.poll(0)
    assert producer.flush(30) == 0, "records still unsent after 30 s"


def _expected(spark: SparkSession, actual: DataFrame, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame([tuple(r[c] for c in actual.columns) for r in rows], actual.schema)


def test_a_report_read_from_kafka_matches_the_oracle_and_the_hand_checked_rooms(
    spark: SparkSession, inturn_topics: KafkaSettings, tmp_path: Path
) -> None:
    start = now_ms() - 3 * HOUR  # old enough that the whole read window (range + grace) lies in the past
    stream = generate(seed=11, rooms=36, messages_per_room=5, start_ms=start, span_ms=HOUR)
    hand = fixture.hand_fixture(start + 30 * 60_000)
    stream.events += hand.events
    stream.acks += hand.acks
    _produce(inturn_topics, stream)
    from_ms, to_ms, grace = start + 10 * 60_000, start + 50 * 60_000, 30 * 60_000
    settings = ReportSettings(
        **inturn_topics.model_dump(),
        report_source="kafka",
        report_out_dir=tmp_path / "report",
        report_grace_ms=grace,
        report_top_n=5,
        report_timeline_bucket_s=600,
    )

    result = run(spark, settings, from_ms, to_ms)

    # The oracle sees what the Kafka read should have selected: records timed inside [from, to + grace).
    events = [e for e in stream.events if from_ms <= e.ts_ms < to_ms + grace]
    acks = [a for a in stream.acks if from_ms <= a.received_at_ms < to_ms + grace]
    msgs = oracle.messages(events, acks, from_ms, to_ms)
    assert len(events) < len(stream.events), "the range must leave some records out"
    assert result.messages == len(msgs) > 100
    assert (result.bad_events, result.bad_acks) == (0, 0)
    out = tmp_path / "report" / RUNS / result.run_id  # where the run staged its tables (published: load.py)
    summary = spark.read.parquet(str(out / "summary"))
    assertDataFrameEqual(summary, _expected(spark, summary, oracle.summary(msgs)))
    room_table = spark.read.parquet(str(out / "rooms"))
    assertDataFrameEqual(room_table, _expected(spark, room_table, oracle.rooms(msgs)))
    hand_rooms = room_table.where(room_table.room_id.startswith("fx-")).select(
        "room_id", "pairs", "inverted", "out_of_order_rate", "ack_timeouts", "late_acks", "dead_letters",
        "dispatch_violations",
    )  # fmt: skip
    assertDataFrameEqual(hand_rooms, [(room, *vals) for room, vals in fixture.ROOMS.items()])


def test_a_missing_statuses_topic_reads_as_empty_and_the_acks_topic_alone_is_read(
    spark: SparkSession, inturn_topics: KafkaSettings
) -> None:
    # A deployment from before the statuses topic (or with the split off) has nothing there: the report goes on.
    start = now_ms() - 60_000
    stream = generate(seed=3, rooms=3, messages_per_room=2, start_ms=start, span_ms=10_000)
    producer = make_producer(inturn_topics)
    for ack in stream.acks:
        producer.produce(inturn_topics.topic_acks, encode(ack), ack.room_id.encode())
    assert producer.flush(30) == 0
    missing = f"{inturn_topics.topic_statuses}.missing"
    source = extract.from_kafka(
        spark, inturn_topics.kafka_bootstrap, inturn_topics.topic_events, inturn_topics.topic_acks,
        start - HOUR, now_ms() + 60_000, None, missing,
    )  # fmt: skip
    try:
        assert source.acks.count() == len(stream.acks) > 0
    finally:
        source.release()
