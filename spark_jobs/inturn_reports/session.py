"""The SparkSession the reports run in: local mode by default, whatever spark-submit gave otherwise."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pyspark.sql import SparkSession

from inturn_reports.jars import report_jars


def spark_session(
    master: str = "local[2]",
    shuffle_partitions: int = 8,
    driver_memory: str = "2g",
    with_jars: bool = True,
    app_name: str = "inturn-report",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """The active session, or a new one on ``master`` with the Kafka source and JDBC driver on its classpath.

    Under ``spark-submit`` (``SPARK_SUBMIT`` context already running) the cluster's settings win:
    ``master`` and ``driver_memory`` are only applied when this process starts the JVM itself.
    """
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
    )
    if "SPARK_ENV_LOADED" not in os.environ:  # not launched by spark-submit: this process owns the JVM
        builder = builder.master(master).config("spark.driver.memory", driver_memory)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if with_jars:
        builder = builder.config("spark.jars", ",".join(str(p) for p in report_jars()))
    return builder.getOrCreate()
