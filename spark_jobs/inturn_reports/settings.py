"""Settings of the report job: ``INTURN_REPORT_*`` environment variables, plus Kafka's.

They belong in ``libs/inturn/settings/report.py`` by the project's convention; they live here
until that file is added (see the issue note).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from inturn.settings import KafkaSettings


class ReportSettings(KafkaSettings):
    """Where the report reads from, writes to, and how Spark runs it."""

    report_source: Literal["kafka", "files"] = Field(
        "kafka", description="Read inturn.events and inturn.acks from Kafka, or from exported files."
    )
    report_input_dir: Path = Field(
        Path("var/export"), description="With source 'files': folder holding events/ and acks/ (Parquet or JSON)."
    )
    report_out_dir: Path = Field(Path("reports"), description="Where the tables, summary.csv and report.html go.")
    report_master: str = Field("local[2]", description="Spark master when not launched by spark-submit.")
    report_shuffle_partitions: int = Field(
        200,
        ge=1,
        description="spark.sql.shuffle.partitions in local mode: the most partitions the shuffle by room starts "
        "from; adaptive execution merges them to about 32 MB each, so what a task of the pass over the rooms holds "
        "stays about the same whatever the input's size (34 partitions at 10M events).",
    )
    report_driver_memory: str = Field(
        "1536m",
        description="spark.driver.memory in local mode (the heap holds what a task of the pass over the rooms "
        "copies of its partition, about 85 MB a task at 10M events by its arrays' sizes, beside Spark's own).",
    )
    report_top_n: int = Field(10, ge=1, description="How many worst rooms to list per measure and day.")
    report_nights: int = Field(
        7, ge=1, description="How many nights (up to --to) the trend charts and the worst rooms of the week cover."
    )
    report_grace_ms: int = Field(
        3_600_000,
        ge=0,
        description="How far past --to events and acks are still read, so late acks of the range's messages count.",
    )
    report_timeline_bucket_s: int = Field(3600, ge=1, description="Width of the 'outcomes over time' buckets.")
    report_jdbc_url: str | None = Field(
        None, description="jdbc:postgresql://host:port/db to also write the summary tables to (optional)."
    )
    report_jdbc_user: str | None = Field(None, description="PostgreSQL user for the JDBC load.")
    report_jdbc_password: SecretStr | None = Field(None, description="PostgreSQL password for the JDBC load.")
