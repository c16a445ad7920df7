"""The whole report under Spark Connect: PySpark starts a local Connect server (``remote("local[2]")``) and the
job runs through it, in a process of its own (a Connect client and a classic session do not share a process)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from inturn.schemas import encode
from tests.reports import oracle
from tests.reports.generator import generate

pytestmark = [
    pytest.mark.spark,
    # A Connect server and the whole job in a subprocess (its own 1200 s bound): 293 s and 305 s on the shared box
    # on 2026-11-28, at the suite's 300 s default.
    pytest.mark.timeout(1500),
]

START = 1_790_200_800_000
SPAN = 4 * 3_600_000

_JOB = """
import os
import sys
# The local Connect server runs the pass's Python workers: with this interpreter (where inturn_reports is).
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYARROW_IGNORE_TIMEZONE"] = "1"
from pathlib import Path
from pyspark.sql import SparkSession
from inturn_reports.job import run
from inturn_reports.settings import ReportSettings

spark = SparkSession.builder.remote("local[2]").config("spark.sql.session.timeZone", "UTC").getOrCreate()
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
root = Path(sys.argv[1])
settings = ReportSettings(report_source="files", report_input_dir=root / "in", report_out_dir=root / "out")
result = run(spark, settings, int(sys.argv[2]), int(sys.argv[3]))
print("messages", result.messages)
spark.stop()
"""


def test_the_whole_report_runs_under_spark_connect(tmp_path: Path) -> None:
    stream = generate(seed=21, rooms=24, messages_per_room=5, start_ms=START, span_ms=SPAN)
    for name, records in (("events", stream.events), ("acks", stream.acks)):
        (tmp_path / "in" / name).mkdir(parents=True)
        (tmp_path / "in" / name / "part-0.json").write_bytes(b"\n".join(encode(r) for r in records) + b"\n")
    done = subprocess.run(
        [sys.executable, "-c", _JOB, str(tmp_path), str(START), str(START + SPAN)],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    msgs = oracle.messages(stream.events, stream.acks, START, START + SPAN)
    assert f"messages {len(msgs)}" in done.stdout
    with (tmp_path / "out" / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    counts = ["messages", "acked", "ack_timeouts", "late_acks", "retries", "pairs", "inverted"]
    got = sorted((r["platform"], r["mode"], r["date"], *(int(r[c]) if r[c] else None for c in counts)) for r in rows)
    want = sorted((r["platform"], r["mode"], r["date"].isoformat(), *(r[c] for c in counts))
                  for r in oracle.summary(msgs))  # fmt: skip
    assert got == want
    assert (tmp_path / "out" / "report.html").stat().st_size > 10_000
