"""``session.spark_session`` in local mode: the JVM it starts runs with the settings docs/reports.md measured."""

from __future__ import annotations

import os
import sys

import pytest
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def _vm_option(spark: SparkSession, name: str) -> str:
    jvm = spark.sparkContext._jvm  # PySpark's gateway to the driver JVM: no public accessor gives it
    assert jvm is not None
    bean_class = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean_class)
    return str(bean.getVMOption(name).getValue())


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("UseParallelGC", "true"),
        ("MaxDirectMemorySize", str(256 * 2**20)),
        # The C2 compiler's smaller inlining budget (session.JIT): Java's defaults are 325 and 2500.
        ("FreqInlineSize", "100"),
        ("InlineSmallCode", "1000"),
    ],
)
def test_the_local_driver_jvm_runs_with_the_sessions_options(spark: SparkSession, option: str, value: str) -> None:
    assert _vm_option(spark, option) == value


def test_the_local_session_merges_the_shuffle_by_size(spark: SparkSession) -> None:
    # A task of the pass over the rooms holds its whole partition: its size, not the input's, must bound it.
    assert spark.conf.get("spark.sql.adaptive.coalescePartitions.parallelismFirst") == "false"
    assert spark.conf.get("spark.sql.adaptive.advisoryPartitionSizeInBytes") == "32m"


def test_the_local_session_runs_the_python_workers_in_this_interpreter() -> None:
    # The pass over the rooms imports inturn_reports in the workers: they must run where it is installed.
    assert os.environ.get("PYSPARK_PYTHON") == sys.executable
