"""One local Spark session for every report test, and helpers turning records into frames."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import pytest
from pyspark.sql import DataFrame, SparkSession

from inturn.schemas import Ack, Event, encode
from inturn_reports.extract import ACK_SCHEMA, EVENT_SCHEMA
from inturn_reports.session import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """local[2], two shuffle partitions, no UI; with the Kafka source and JDBC driver on the classpath."""
    session = spark_session(
        "local[2]",
        shuffle_partitions=2,
        driver_memory="1g",
        app_name="inturn-report-tests",
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
    rows = [json.loads(encode(e)) for e in events]  # the record as on the topic
    return spark.createDataFrame([tuple(r.get(f.name) for f in EVENT_SCHEMA.fields) for r in rows], EVENT_SCHEMA)


def acks_frame(spark: SparkSession, acks: Sequence[Ack]) -> DataFrame:
    """The acks as the extract step gives them."""
    rows = [json.loads(encode(a)) for a in acks]
    return spark.createDataFrame([tuple(r.get(f.name) for f in ACK_SCHEMA.fields) for r in rows], ACK_SCHEMA)
