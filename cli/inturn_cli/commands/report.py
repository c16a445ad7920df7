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
        "(INTURN_REPORT_MASTER, default local[2]). After a good night it deletes the nights past "
        "INTURN_REPORT_KEEP_DAYS and the runs no night names (INTURN_REPORT_CLEANUP_GRACE_S), and publishes nights "
        "an earlier version wrote without manifests; see docs/reports.md.",
    )
    from inturn_reports.flags import add_arguments  # argparse only: Spark is imported when the job runs

    add_arguments(parser)
    parser.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    try:
        from inturn_reports.flags import settings_from
        from inturn_reports.job import parse_time, run_args  # importing the job starts no Spark
    except ImportError as exc:  # pyspark, pyarrow, numpy, pandas: the report's extra, not in a service install
        raise ConfigError(f"the report needs its extra (pip install 'inturn[report]'): {exc.name} is missing") from exc

    # The flags and settings are checked here, before run_args starts Spark (tens of seconds).
    from_ms, to_ms = parse_time(args.from_), parse_time(args.to)
    if to_ms <= from_ms:
        raise ConfigError(f"--to ({args.to}) must be after --from ({args.from_}): the range [--from, --to) is empty")
    settings_from(args)
    return run_args(args)
