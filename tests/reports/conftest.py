"""One local Spark session for every report test, and helpers turning records into frames."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from inturn.schemas import Ack, Event
from inturn_reports.extract import ACK_SCHEMA, EVENT_SCHEMA
from inturn_reports.session import spark_session

#: ``make test-compat`` sets INTURN_TEST_SPARK_JARS=0: no jar from Maven Central on the session's classpath.
WITH_JARS = os.environ.get("INTURN_TEST_SPARK_JARS", "1") != "0"


def needs_connector(name: str) -> pytest.MarkDecorator:
    """Skip a test module of an object store when the session has no connector jars (``WITH_JARS``)."""
    return pytest.mark.skipif(not WITH_JARS, reason=f"the {name} connector is a jar from Maven Central")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """local[2], two shuffle partitions, no UI; with the Kafka source, the JDBC driver and the s3a and gs connectors
    on the classpath."""
    jars = WITH_JARS
    session = spark_session(
        "local[2]",
        shuffle_partitions=2,
        driver_memory="1g",
        app_name="inturn-report-tests",
        # make test-compat runs the oracle tests without the Kafka source: not every PySpark of the supported range
        # has its spark-sql-kafka on Maven Central yet (4.3.0 had none on 2026-11-28).
        with_jars=jars,
        connectors=("s3a", "gs") if jars else (),  # test_storage.py, test_storage_gcs.py
        # Frames here have hundreds of rows: compiling whole-stage code and re-planning cost more than they save.
        conf={"spark.sql.codegen.wholeStage": "false", "spark.sql.adaptive.enabled": "false"},
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def events_frame(spark: SparkSession, events: Sequence[Event]) -> DataFrame:
    """The events as the extract step gives them (one column per ``Event`` field)."""
    rows = [msgspec.to_builtins(e) for e in events]
    return spark.createDataFrame([tuple(r.get(f.name) for f in EVENT_SCHEMA.fields) for r in rows], EVENT_SCHEMA)


def acks_frame(spark: SparkSession, acks: Sequence[Ack]) -> DataFrame:
    """The acks as the extract step gives them."""
    rows = [msgspec.to_builtins(a) for a in acks]
    return spark.createDataFrame([tuple(r.get(f.name) for f in ACK_SCHEMA.fields) for r in rows], ACK_SCHEMA)


def assert_same_rows(actual: pa.Table, expected: Sequence[Mapping[str, Any]], columns: Sequence[str] = ()) -> None:
    """``actual`` holds the ``expected`` rows (in any order), column for column; doubles to 1e-9 relative.

    ``columns``: the columns compared, all of ``actual``'s by default (each expected row must have them all).
    """
    names = list(columns) or actual.column_names

    def order(values: Mapping[str, Any]) -> tuple[str, ...]:  # rows sorted by everything but their doubles
        return tuple("" if isinstance(values[n], float) else repr(values[n]) for n in names)

    got = [tuple(r[n] for n in names) for r in sorted(actual.select(names).to_pylist(), key=order)]
    want = [
        tuple(pytest.approx(r[n], rel=1e-9) if isinstance(r[n], float) else r[n] for n in names)
        for r in sorted(expected, key=order)
    ]
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want, strict=True):
        assert g == w
