"""The SparkSession the reports run in: local mode by default, whatever spark-submit gave otherwise."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping

from pyspark import SparkConf
from pyspark.sql import SparkSession

from inturn_reports.jars import connector_jars, report_jars

#: Adaptive query execution, in both modes: Spark re-plans each stage from the sizes the previous
#: one really wrote, merging small shuffle partitions and splitting skewed ones (a room with far
#: more messages than the others).
ADAPTIVE = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.adaptive.skewJoin.enabled": "true",
}
#: Local mode: the driver JVM is the whole of Spark, and its heap (``driver_memory``) is not what bounds
#: its resident memory. Direct buffers may otherwise grow to the heap's size again (nothing in local mode
#: needs many: no network shuffle, on-heap Parquet vectors), and glibc gives each of the JVM's threads
#: its own malloc arena for native (de)compression: both are capped, so the process's peak follows the heap.
#: The parallel collector, not G1: a batch job wants throughput, not short pauses, and G1's remembered sets and
#: concurrent threads cost memory beside the heap. Over the benchmark's 10M events (two cores, twelve runs
#: alternated, 2026-11-26) the report's peak was 1.58-1.69 GB against 1.71-1.89 GB with G1; its time moved
#: within the box's noise (paired runs differed by -13.3 to +3.4 s; docs/reports.md).
#: A smaller inlining budget for the C2 compiler (Java's defaults: 325 bytecodes for a hot callee, 2500 bytes of
#: its compiled code): the report runs once in a fresh JVM, and with two cores its compiler threads take CPU from
#: its tasks. Over the benchmark's 10M events C2 compiled for 28.1 s instead of 47.9 s (``-XX:+CITime``), the
#: report ran 3.4-7.5 s faster in each of four pairs alternated with the defaults, and the plain scan did not
#: change (2026-11-26, docs/reports.md). A budget half this one (50/500) made the report slower.
JIT = "-XX:FreqInlineSize=100 -XX:InlineSmallCode=1000"
LOCAL_JVM_OPTIONS = f"-XX:MaxDirectMemorySize=256m -XX:+UseParallelGC {JIT}"
LOCAL_JVM_ENV = {"MALLOC_ARENA_MAX": "2"}
#: Local mode: AQE merges the shuffle's partitions by size (32 MB of shuffle output each, about 1M rows of the
#: narrow row), not down to the cores: a task of the pass over the rooms holds its whole partition in arrays, so
#: the partition's size, not the input's, sets what a task holds (34 partitions at 10M events, about 85 MB a task
#: by its arrays' sizes; the same time as 16 partitions of twice the size, two alternated pairs on 2026-11-26).
LOCAL_ADAPTIVE = {
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "32m",
}
#: On a cluster (under spark-submit), unless spark-submit says otherwise: start from many shuffle
#: partitions and let AQE merge them by size (64 MB each), not down to the default parallelism.
CLUSTER_DEFAULTS = {
    "spark.sql.shuffle.partitions": "400",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "64m",
}


def spark_session(
    master: str = "local[2]",
    shuffle_partitions: int = 200,
    driver_memory: str = "1536m",
    with_jars: bool = True,
    app_name: str = "inturn-report",
    conf: Mapping[str, str] | None = None,
    connectors: Iterable[str] = (),
) -> SparkSession:
    """The active session, or a new one on ``master`` with the report's pass (and, ``with_jars``, the Kafka source
    and JDBC driver) on its classpath.

    Under ``spark-submit`` (``SPARK_SUBMIT`` context already running) the cluster's settings win:
    ``master``, ``driver_memory`` and ``shuffle_partitions`` are only applied when this process
    starts the JVM itself (local mode: ``LOCAL_ADAPTIVE`` merges the partitions by size); on a cluster
    ``CLUSTER_DEFAULTS`` fill in what spark-submit did not set.
    AQE (``ADAPTIVE``) is on in both unless ``conf`` turns it off.

    ``connectors``: URI schemes (``s3a``, ``gs``, ``abfss``) whose Hadoop connector this process puts on the
    driver's class path when it starts the JVM (``spark.driver.extraClassPath``: the jars are read where they lie,
    not copied as ``spark.jars`` are; the s3a one holds the 560 MB AWS SDK bundle). Under spark-submit the
    cluster's class path must hold them already (the report image puts them in ``/opt/inturn/jars``).
    """
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in ADAPTIVE.items():
        builder = builder.config(key, value)
    if "SPARK_ENV_LOADED" not in os.environ:  # not launched by spark-submit: this process owns the JVM
        builder = (
            builder.master(master)
            .config("spark.driver.memory", driver_memory)
            .config("spark.driver.extraJavaOptions", LOCAL_JVM_OPTIONS)
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        )
        for key, value in LOCAL_ADAPTIVE.items():
            builder = builder.config(key, value)
        connector_path = [str(jar) for scheme in sorted(set(connectors)) for jar in connector_jars(scheme)]
        if connector_path:  # read by the JVM this process is about to start (PySpark passes it to spark-submit)
            builder = builder.config("spark.driver.extraClassPath", os.pathsep.join(connector_path))
        for key, value in LOCAL_JVM_ENV.items():  # read by the JVM this process is about to start
            os.environ.setdefault(key, value)
        # The pass over the rooms runs in Python workers: the same interpreter as this one (its packages), not
        # whatever ``python3`` is first on the PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # PySpark's Arrow conversions warn (an error under strict warnings) unless this is set, driver and workers.
        os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    else:
        submitted = SparkConf()  # what spark-submit passed (--conf, spark-defaults.conf)
        for key, value in CLUSTER_DEFAULTS.items():
            if not submitted.contains(key):
                builder = builder.config(key, value)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if with_jars:  # the Kafka source and the JDBC driver
        builder = builder.config("spark.jars", ",".join(str(p) for p in report_jars()))
    return builder.getOrCreate()
