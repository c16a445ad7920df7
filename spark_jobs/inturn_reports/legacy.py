"""Nights written before manifests (before 2026-11-28: ``<out>/<table>/date=YYYY-MM-DD/part-*.parquet`` straight
under the output, by Arrow or, before 2026-11-26, by Spark's ``partitionBy``), adopted into the manifest layout.

Adopting a night writes its manifest (``_nights/YYYY-MM-DD.json``) naming the folders where its tables already lie
(``<table>``, relative to the output; ``"run": "legacy"``, ``"legacy": true``): nothing is copied or moved, and from
then on the trends read it, and retention expires it, like any other night. A night that already has a manifest
(a run of this layout published it) is left as it is, and so is a night whose files do not read as today's
tables (logged as ``report_legacy_night_unreadable``; the trends would stop on it). Each run adopts what it finds
after publishing its own nights (``job.run``); ``python -m inturn_reports.legacy --out URI`` (``--dry-run``) does it
without a run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from collections.abc import Mapping, Sequence

import structlog

from inturn.errors import InturnError, exit_status
from inturn.settings import load
from inturn_reports.load import NIGHTS, ReportLoadError, data_file, published_dates, read_night, write_manifest
from inturn_reports.settings import ReportSettings
from inturn_reports.storage import GcsOptions, ObjectStore, S3Options, to_uri
from inturn_reports.transform import SCHEMAS

_log = structlog.get_logger("inturn_reports")

#: The ``run`` of an adopted night's manifest.
LEGACY_RUN = "legacy"
_DATE_FOLDER = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")
DAY_MS = 86_400_000


def legacy_nights(store: ObjectStore) -> dict[dt.date, dict[str, str]]:
    """The nights the earlier layout holds under the output: per night, each table that has a Parquet file of it
    (table name -> its folder)."""
    found: dict[dt.date, dict[str, str]] = {}
    for name in SCHEMAS:
        for key in store.keys(name):
            parts = key.split("/")  # <table>/date=YYYY-MM-DD/<file>
            match = _DATE_FOLDER.match(parts[1]) if len(parts) == 3 else None
            if match is None or not data_file(key):
                continue
            try:
                day = dt.date.fromisoformat(match.group(1))
            except ValueError:
                continue
            found.setdefault(day, {})[name] = name
    return found


def adopt(store: ObjectStore, *, dry_run: bool = False) -> list[dt.date]:
    """Publish every night of the earlier layout that has no manifest yet (the module's doc); the nights adopted
    (or, with ``dry_run``, that would be), in order."""
    published = set(published_dates(store))
    adopted = []
    for day, tables in sorted(legacy_nights(store).items()):
        if day in published:
            continue
        try:  # a night read only if every table reads as today's schema: the trends must not stop on it
            for name, folder in tables.items():
                read_night(store, name, folder, day, SCHEMAS[name].names)
        except ReportLoadError as exc:
            _log.warning("report_legacy_night_unreadable", night=day.isoformat(), error=str(exc))
            continue
        if not dry_run:
            start = int(dt.datetime.combine(day, dt.time(), dt.UTC).timestamp() * 1000)
            write_manifest(store, day, LEGACY_RUN, (start, start + DAY_MS), _sorted(tables), legacy=True)
        adopted.append(day)
    return adopted


def _sorted(tables: Mapping[str, str]) -> dict[str, str]:
    return dict(sorted(tables.items()))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m inturn_reports.legacy``: adopt the earlier layout's nights under the output location."""
    parser = argparse.ArgumentParser(
        prog="python -m inturn_reports.legacy",
        description="Publish the nights that an earlier report wrote without manifests (<out>/<table>/date=.../), "
        "so that the trends read them and retention expires them.",
    )
    parser.add_argument("--out", help="the output location, a path or URI (INTURN_REPORT_OUT_DIR)")
    parser.add_argument("--dry-run", action="store_true", help="list the nights, write nothing")
    args = parser.parse_args(argv)
    try:
        settings = load(ReportSettings, **({"report_out_dir": args.out} if args.out else {}))
        store = ObjectStore(
            to_uri(settings.report_out_dir),
            S3Options(settings.report_s3_endpoint, settings.report_s3_region, settings.report_s3_path_style),
            GcsOptions(settings.report_gcs_endpoint, settings.report_gcs_anonymous),
        )
        nights = adopt(store, dry_run=args.dry_run)
    except InturnError as exc:
        return exit_status("inturn_reports.legacy", exc)
    verb = "would adopt" if args.dry_run else "adopted"
    print(f"{verb} {len(nights)} nights under {store.uri(NIGHTS)}: {', '.join(d.isoformat() for d in nights) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
