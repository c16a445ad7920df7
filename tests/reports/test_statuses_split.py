"""The report reads the acks and the statuses topics as one (docs/webhook.md, Statuses off the workers' path): the
same statuses, split across the two as the webhook splits them, give the same six tables as all of them on the acks
topic, and the tables the oracle works out. ``test_kafka_end_to_end.py`` reads such a split from real Kafka."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from inturn.schemas import Ack, Event, encode
from inturn_reports import extract
from inturn_reports.job import TABLES, compute_tables
from inturn_reports.transform import ReportParams
from tests.reports import fixture, oracle
from tests.reports.conftest import assert_same_rows
from tests.reports.generator import generate, split_statuses

pytestmark = pytest.mark.spark

START = 1_790_200_800_000  # 2026-09-23 22:00 UTC; the 4 h range crosses midnight
SPAN = 4 * 3_600_000


def _lines(folder: Path, records: list[Ack] | list[Event]) -> None:
    folder.mkdir(parents=True)
    (folder / "part-0.json").write_bytes(b"\n".join(encode(r) for r in records) + b"\n")


@pytest.fixture(scope="module")
def reports(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The six tables from one export with every status in acks/ and from one with them split into acks/ and
    statuses/; the oracle's messages; the split's sizes."""
    stream = generate(seed=13, rooms=30, messages_per_room=5, start_ms=START, span_ms=SPAN)
    hand = fixture.hand_fixture(START + 3_600_000)
    events, acks = stream.events + hand.events, stream.acks + hand.acks
    deciding, later = split_statuses(acks)
    root = tmp_path_factory.mktemp("statuses-split")
    _lines(root / "whole" / "events", events)
    _lines(root / "whole" / "acks", acks)  # no statuses/ folder: an export from before the split reads as before
    _lines(root / "split" / "events", events)
    _lines(root / "split" / "acks", deciding)
    _lines(root / "split" / "statuses", later)
    params = ReportParams(from_ms=START, to_ms=START + SPAN, top_n=3, timeline_bucket_ms=900_000)
    tables: dict[str, dict[str, pa.Table]] = {}
    for name in ("whole", "split"):
        source = extract.from_files(spark, (root / name).as_uri(), START, START + SPAN + 3_600_000)
        tables[name] = compute_tables(source.events, source.acks, params)
        source.release()
    msgs = oracle.messages(events, acks, START, START + SPAN)
    return {"tables": tables, "msgs": msgs, "deciding": deciding, "later": later}


def test_the_split_moves_later_statuses_of_every_platform_off_the_acks_topic(reports: dict[str, Any]) -> None:
    # Guards the comparison below against a split that moved nothing.
    later: list[Ack] = reports["later"]
    assert {"whatsapp", "instagram", "messenger"} <= {a.platform for a in later}
    assert {a.status.value for a in later} == {"sent", "delivered", "read", "failed"}
    assert len(reports["deciding"]) > 50
    assert len(later) > 100


def test_the_same_statuses_split_across_acks_and_statuses_give_the_six_tables_unchanged(
    reports: dict[str, Any],
) -> None:
    whole, split = reports["tables"]["whole"], reports["tables"]["split"]
    assert set(split) == set(TABLES)
    for name in TABLES:
        assert whole[name].num_rows > 0, name
        assert_same_rows(split[name], whole[name].to_pylist())


def test_the_split_s_tables_are_the_oracle_s(reports: dict[str, Any]) -> None:
    split, msgs = reports["tables"]["split"], reports["msgs"]
    assert_same_rows(split["summary"], oracle.summary(msgs))
    assert_same_rows(split["rooms"], oracle.rooms(msgs))
    assert_same_rows(split["platforms"], oracle.platforms(msgs))
