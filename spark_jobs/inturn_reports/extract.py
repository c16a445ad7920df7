"""Reading ``inturn.events`` and the statuses (``inturn.acks`` and ``inturn.statuses``) for a time range, from Kafka
or from exported files.

Both sources give the same two frames, whose columns are the fields of ``inturn.schemas.Event``
and ``inturn.schemas.Ack`` (status and type as strings). The acks frame holds the records of both status topics:
the webhook puts a status that can no longer change a worker's outcome on the statuses topic rather than the acks
topic (docs/webhook.md), and the report uses every status wherever it went, so it reads the two as one.

Kafka is read in batch mode between the offsets of ``from_ms`` and ``to_ms + grace_ms`` (Kafka record timestamps);
files are filtered on ``ts_ms`` / ``received_at_ms`` over the same range. Records that are not valid JSON of the schema
are not reported on, but counted (``Extracted.bad_records``) so the job can say how many it dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]  # py4j ships no types
from pyspark import StorageLevel
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from inturn.errors import ConfigError
from inturn_reports.storage import join

EVENT_SCHEMA = StructType(
    [
        StructField("v", IntegerType()),
        StructField("type", StringType()),
        StructField("room_id", StringType()),
        StructField("message_id", StringType()),
        StructField("platform", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("attempt", IntegerType()),
        StructField("worker_id", StringType()),
        StructField("mode", StringType()),
        StructField("ts_ms", LongType()),
        StructField("created_at_ms", LongType()),
        StructField("consumed_at_ms", LongType()),
        StructField("sent_at_ms", LongType()),
        StructField("acked_at_ms", LongType()),
        StructField("platform_message_id", StringType()),
        StructField("detail", StringType()),
    ]
)

ACK_SCHEMA = StructType(
    [
        StructField("v", IntegerType()),
        StructField("room_id", StringType()),
        StructField("message_id", StringType()),
        StructField("platform", StringType()),
        StructField("platform_message_id", StringType()),
        StructField("status", StringType()),
        StructField("platform_ts_ms", LongType()),
        StructField("received_at_ms", LongType()),
        StructField("recipient", StringType()),
        StructField("error", StringType()),
    ]
)

#: Fields without which a record cannot be placed; a record missing one counts as bad.
_EVENT_REQUIRED = ("type", "room_id", "message_id", "ts_ms")
_ACK_REQUIRED = ("room_id", "platform_message_id", "status", "platform_ts_ms", "received_at_ms")


@dataclass(frozen=True)
class Extracted:
    """The two input frames, and the raw records that could not be read as either.

    Records parsed from Kafka or JSON are persisted (the transforms read them several times, and a
    second Kafka read could see different data); ``release`` frees them once the report is written.
    """

    events: DataFrame
    acks: DataFrame
    bad_events: DataFrame
    bad_acks: DataFrame
    parsed: tuple[DataFrame, ...] = ()

    def release(self) -> None:
        """Unpersist the parsed records."""
        for frame in self.parsed:
            frame.unpersist()


def _valid(required: tuple[str, ...]) -> Column:
    cond = F.lit(True)
    for name in required:
        cond = cond & F.col(name).isNotNull()
    return cond


def _split(parsed: DataFrame, schema: StructType, required: tuple[str, ...]) -> tuple[DataFrame, DataFrame]:
    good = parsed.where(F.col("r").isNotNull()).select("r.*").where(_valid(required))
    bad = parsed.where(F.col("r").isNull() | ~F.coalesce(_valid(tuple(f"r.{n}" for n in required)), F.lit(False)))
    return good.select([f.name for f in schema.fields]), bad


def from_kafka(
    spark: SparkSession,
    bootstrap: str,
    events_topic: str,
    acks_topic: str,
    from_ms: int,
    to_ms: int,
    client_options: dict[str, str] | None = None,
    statuses_topic: str | None = None,
) -> Extracted:
    """The events topic, and the acks and statuses topics as one, between the offsets of ``from_ms`` and ``to_ms``
    (record timestamps), batch mode. ``statuses_topic`` None: the acks topic alone.

    A missing events or acks topic fails the read; a missing statuses topic reads as empty (a deployment from before
    the webhook wrote one, or one that keeps the split off: nothing was written there). It is read by an exact
    ``subscribePattern``, which matches only topics that exist: ``subscribe`` fails on a missing one."""

    def read(
        topic: str, schema: StructType, required: tuple[str, ...], optional: bool = False
    ) -> tuple[DataFrame, DataFrame]:
        which = ("subscribePattern", f"^{re.escape(topic)}$") if optional else ("subscribe", topic)
        reader = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option(*which)
            # One timestamp for every partition: Spark looks up each partition's offset for it
            # (the same lookup as startingOffsetsByTimestamp, without listing the partitions here).
            .option("startingTimestamp", str(from_ms))
            .option("endingTimestamp", str(to_ms))
            # A partition with no record at or after from_ms has nothing for the range.
            .option("startingOffsetsByTimestampStrategy", "latest")
        )
        for key, value in (client_options or {}).items():
            reader = reader.option(f"kafka.{key}", value)
        raw = reader.load().select(F.from_json(F.col("value").cast("string"), schema).alias("r"))
        parsed.append(raw.persist(StorageLevel.MEMORY_AND_DISK))
        return _split(raw, schema, required)

    parsed: list[DataFrame] = []
    events, bad_events = read(events_topic, EVENT_SCHEMA, _EVENT_REQUIRED)
    acks, bad_acks = read(acks_topic, ACK_SCHEMA, _ACK_REQUIRED)
    if statuses_topic is not None:
        statuses, bad_statuses = read(statuses_topic, ACK_SCHEMA, _ACK_REQUIRED, optional=True)
        acks, bad_acks = acks.unionByName(statuses), bad_acks.unionByName(bad_statuses)
    return Extracted(events, acks, bad_events, bad_acks, tuple(parsed))


def from_files(spark: SparkSession, input_uri: str, from_ms: int, to_ms: int) -> Extracted:
    """``<input_uri>/events``, and ``<input_uri>/acks`` with ``<input_uri>/statuses`` as one (Parquet, or JSON lines
    as on the topics; ``statuses`` may be absent: an export of the acks topic alone), filtered to the range; read
    through Spark, so from any filesystem Spark reaches (``file://``, ``s3a://``, ``gs://``, ``abfss://``)."""

    def read(
        name: str, schema: StructType, required: tuple[str, ...], ts: str, optional: bool = False
    ) -> tuple[DataFrame, DataFrame] | None:
        folder = join(input_uri, name)
        try:
            # Parquet when the folder holds any .parquet file, at any depth; JSON lines otherwise.
            probe = (
                spark.read.schema(schema)
                .option("recursiveFileLookup", "true")
                .option("pathGlobFilter", "*.parquet")
                .parquet(folder)
            )
            is_parquet = bool(probe.inputFiles())
        except (Py4JJavaError, PySparkException) as exc:
            if optional and _path_not_found(exc):
                return None
            raise ConfigError(
                f"cannot read {folder} (expected a folder of Parquet or JSON lines files): "
                f"{(str(exc).strip().splitlines() or [''])[0]}"
            ) from exc
        if is_parquet:
            frame = spark.read.schema(schema).parquet(folder)
            parsed = frame.select(F.struct(*[F.col(f.name) for f in schema.fields]).alias("r"))
        else:
            text = spark.read.text(folder).where(F.length(F.trim("value")) > 0)
            parsed = text.select(F.from_json("value", schema).alias("r")).persist(StorageLevel.MEMORY_AND_DISK)
            frames.append(parsed)  # parsing JSON once is worth the memory; Parquet is cheap to read again
        good, bad = _split(parsed, schema, required)
        return good.where((F.col(ts) >= from_ms) & (F.col(ts) < to_ms)), bad

    frames: list[DataFrame] = []
    events, bad_events = _present(read("events", EVENT_SCHEMA, _EVENT_REQUIRED, "ts_ms"))
    acks, bad_acks = _present(read("acks", ACK_SCHEMA, _ACK_REQUIRED, "received_at_ms"))
    statuses = read("statuses", ACK_SCHEMA, _ACK_REQUIRED, "received_at_ms", optional=True)
    if statuses is not None:
        acks, bad_acks = acks.unionByName(statuses[0]), bad_acks.unionByName(statuses[1])
    return Extracted(events, acks, bad_events, bad_acks, tuple(frames))


def _present(frames: tuple[DataFrame, DataFrame] | None) -> tuple[DataFrame, DataFrame]:
    """A folder that must exist was read (``read`` returns None only for an optional one)."""
    assert frames is not None
    return frames


def _path_not_found(exc: Exception) -> bool:
    """Whether Spark's error says the folder does not exist (Spark's condition ``PATH_NOT_FOUND``)."""
    if isinstance(exc, PySparkException):
        return exc.getCondition() == "PATH_NOT_FOUND"
    return "PATH_NOT_FOUND" in str(exc) or "FileNotFoundException" in str(exc)
