"""Settings of the report job: ``INTURN_REPORT_*`` environment variables, plus Kafka's.

They belong in ``libs/inturn/settings/report.py`` by the project's convention; they live here
until that file is added (see the issue note).
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from inturn.settings import KafkaSettings


class ReportSettings(KafkaSettings):
    """Where the report reads from, writes to, and how Spark runs it."""

    report_source: Literal["kafka", "files"] = Field(
        "kafka", description="Read inturn.events and inturn.acks from Kafka, or from exported files."
    )
    report_input_dir: str = Field(
        "var/export",
        description="With source 'files': the folder holding events/ and acks/ (Parquet or JSON lines), as a path "
        "or a file://, s3a://, gs:// or abfss:// URI.",
    )
    report_out_dir: str = Field(
        "reports",
        description="Where the nights' tables, their manifests (_nights/), summary.csv and report.html go, and where "
        "the trends read earlier nights from: a path or a file://, s3a://, gs:// or abfss:// URI.",
    )
    report_s3_endpoint: str | None = Field(
        None,
        description="s3a:// on an S3-compatible server other than AWS (MinIO, Ceph...): its URL, e.g. "
        "http://minio:9000. Credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a web identity).",
    )
    report_s3_region: str | None = Field(None, description="s3a://: the bucket's region (e.g. eu-west-1).")
    report_s3_path_style: bool = Field(
        False,
        description="s3a://: address buckets by path (http://host/bucket/key), as most S3-compatible servers want.",
    )
    report_gcs_endpoint: str | None = Field(
        None,
        description="gs:// through another endpoint than Google's (a private endpoint, a local server): its root URL, "
        "e.g. https://storage-example.p.googleapis.com. Credentials: Google's application default credentials.",
    )
    report_gcs_anonymous: bool = Field(
        False,
        description="gs:// with no credentials, for a local server that checks none (needs report_gcs_endpoint).",
    )
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
    report_keep_days: int = Field(
        400,
        ge=0,
        description="Retention: after each good night, the published nights dated more than this many days before "
        "the latest one (at most today, UTC) are deleted, their manifest first, then their tables; 0 keeps every "
        "night.",
    )
    report_cleanup_grace_s: int = Field(
        43_200,
        ge=60,
        description="After each good night, a run's folder under runs/ that no night's manifest names (a failed "
        "run's, or one a later run replaced) is deleted once the run started this many seconds ago: longer than any "
        "run takes, so a run still writing is never touched.",
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

    @model_validator(mode="after")
    def _anonymous_needs_an_endpoint(self) -> ReportSettings:
        """Google itself takes no anonymous writes: without an endpoint the setting can only be a mistake."""
        if self.report_gcs_anonymous and not self.report_gcs_endpoint:
            raise ValueError("report_gcs_anonymous is for a local GCS server: set report_gcs_endpoint to its URL")
        return self

    @field_validator("report_input_dir", "report_out_dir", mode="before")
    @classmethod
    def _path_as_text(cls, value: Any) -> Any:
        """A ``pathlib.Path`` given in code is taken as the path it names."""
        return os.fspath(value) if isinstance(value, os.PathLike) else value
