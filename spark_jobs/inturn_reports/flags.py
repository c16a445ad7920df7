"""The report's command-line flags, shared by ``inturn report`` and ``python -m inturn_reports``.

Kept apart from the job so the CLI can list them without importing Spark.
"""

from __future__ import annotations

import argparse

from inturn.settings import load
from inturn_reports.settings import ReportSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The report's flags (shared by ``inturn report`` and ``python -m inturn_reports``)."""
    parser.add_argument(
        "--from", dest="from_", metavar="FROM", required=True, help="start of the range: epoch ms, date or ISO time"
    )
    parser.add_argument("--to", required=True, help="end of the range (exclusive)")
    parser.add_argument("--source", choices=["kafka", "files"], help="where to read (INTURN_REPORT_SOURCE)")
    parser.add_argument(
        "--input",
        help="folder with events/ and acks/: a path or file://, s3a://, gs://, abfss:// URI (INTURN_REPORT_INPUT_DIR)",
    )
    parser.add_argument("--out", help="output location: a path or URI as --input (INTURN_REPORT_OUT_DIR)")
    parser.add_argument("--top-n", type=int, help="worst rooms per measure and day (INTURN_REPORT_TOP_N)")
    parser.add_argument(
        "--nights", type=int, help="nights of earlier output the trend charts cover (INTURN_REPORT_NIGHTS)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print where the run went and what it counted as one JSON document"
    )
    parser.add_argument("--jdbc-url", help="also write summary tables to PostgreSQL (INTURN_REPORT_JDBC_URL)")


def settings_from(args: argparse.Namespace) -> ReportSettings:
    """Settings from the environment, with the flags that were given on top."""
    flags = {
        "report_source": args.source,
        "report_input_dir": args.input,
        "report_out_dir": args.out,
        "report_top_n": args.top_n,
        "report_nights": args.nights,
        "report_jdbc_url": args.jdbc_url,
    }
    return load(ReportSettings, **{k: v for k, v in flags.items() if v is not None})
