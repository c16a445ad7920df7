"""``inturn report --from ... --to ...``: the delivery and ordering report, on local Spark."""

from __future__ import annotations

import argparse

from inturn.errors import ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``report``."""
    parser = sub.add_parser(
        "report",
        help="delivery and ordering report (PySpark) for a time range",
        description="Read inturn.events and inturn.acks for [--from, --to) from Kafka (or exported files) and "
        "write Parquet tables partitioned by date, summary.csv and report.html to --out. Runs Spark locally "
        "(INTURN_REPORT_MASTER, default local[2]); see docs/reports.md.",
    )
    from inturn_reports.flags import add_arguments  # argparse only: Spark is imported when the job runs

    add_arguments(parser)
    parser.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    try:
        from inturn_reports.job import run_args
    except ImportError as exc:  # pyspark, pyarrow, numpy, pandas: the report's extra, not in a service install
        raise ConfigError(f"the report needs its extra (pip install 'inturn[report]'): {exc.name} is missing") from exc

    return run_args(args)
