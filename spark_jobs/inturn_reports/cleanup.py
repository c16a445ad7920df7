"""Keeping the output location tidy over months of nights: what no reader will read again is deleted after each good
night (``job.run``, once its nights are published and its page written).

- **Nights past retention** (``INTURN_REPORT_KEEP_DAYS``, 400; 0 keeps all): a night dated more than that many days
  before the latest night published (or before today, UTC, if that night is later) is unpublished, its manifest
  deleted first (from then on no reader reads it), then its tables' ``date=`` folders. The nights the run itself
  just published are never expired by it.
- **Unpublished runs**: a folder ``runs/<run>/`` that no night's manifest names (a run that failed or was killed
  before publishing, or one whose nights a later run replaced) is deleted, and so is a ``date=`` folder of a run
  whose other nights are still published, once that night names another run. Only runs that started more than
  ``INTURN_REPORT_CLEANUP_GRACE_S`` (12 h) ago are touched (the run's start is in its name): a run still writing
  has published nothing yet, and is left alone.
- **Replaced nights of the earlier layout** (``legacy``): ``<table>/date=YYYY-MM-DD/`` straight under the output,
  once that night's manifest names another run's tables (a night not adopted yet is never touched).

Every step is safe to stop half-way and repeat: a deleted manifest makes its night's folders unread, and the
folders left are found again by the next night's sweep. A manifest this report cannot read (of a later format) stops
the sweep: what it names is not known, so nothing is deleted.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Collection

from inturn_reports.legacy import legacy_nights
from inturn_reports.load import NIGHTS, RUNS, Night, ReportLoadError, all_nights
from inturn_reports.storage import ObjectStore

_RUN_START = re.compile(r"^(\d{8}T\d{6})Z-")
_DATE_FOLDER = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")


@dataclasses.dataclass(frozen=True)
class Cleanup:
    """What a sweep deleted (keys relative to the output location)."""

    expired: tuple[str, ...] = ()  # the nights unpublished, YYYY-MM-DD
    runs: tuple[str, ...] = ()  # run folders deleted whole
    folders: tuple[str, ...] = ()  # date= folders deleted: of expired nights, and of replaced nights of runs kept


def run_started(run: str) -> dt.datetime | None:
    """When a run started, from its name (``load.new_run_id``); None for a name of another form."""
    match = _RUN_START.match(run)
    if match is None:
        return None
    return dt.datetime.strptime(match.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=dt.UTC)


def _night_folders(night: Night) -> set[str]:
    """The ``date=`` folders a night's manifest points at."""
    return {f"{folder.strip('/')}/date={night.date.isoformat()}" for folder in night.tables.values()}


def _check_folder(night: Night) -> None:
    for folder in night.tables.values():
        parts = folder.strip("/").split("/")
        if not folder.strip("/") or ".." in parts or parts[0] == NIGHTS:
            raise ReportLoadError(f"the manifest of {night.date} names {folder!r}, no table folder of the output")


def sweep(
    store: ObjectStore,
    *,
    keep_days: int,
    grace: dt.timedelta,
    now: dt.datetime,
    keep_runs: Collection[str] = (),
) -> Cleanup:
    """Delete the nights past retention and the runs no night names (the module's doc). ``now`` is aware (UTC);
    ``keep_runs`` are never expired nor swept (the run sweeping)."""
    nights = all_nights(store)  # every manifest, read before anything is deleted
    for night in nights:
        _check_folder(night)
    expired: list[Night] = []
    if keep_days > 0 and nights:
        # Counted back from the latest night published (the nights kept are those of the last keep_days days
        # reported, whatever the calendar says), but never from a night after today: a night of wrongly dated
        # records cannot expire the others.
        latest = min(max(n.date for n in nights), now.astimezone(dt.UTC).date())
        cutoff = latest - dt.timedelta(days=keep_days)
        expired = [n for n in nights if n.date < cutoff and n.run not in keep_runs]
    deleted_folders: list[str] = []
    for night in expired:
        store.delete(f"{NIGHTS}/{night.date.isoformat()}.json")  # unpublished first: no reader looks further
        for folder in sorted(_night_folders(night)):
            store.delete_folder(folder)
            deleted_folders.append(folder)
    kept = [n for n in nights if n not in expired]
    named_runs = {n.run for n in kept} | set(keep_runs)
    named_folders = set().union(*(_night_folders(n) for n in kept))

    runs: dict[str, set[str]] = {}  # run -> its date= folders
    for key in store.keys(RUNS):
        parts = key.split("/")  # runs/<run>/<table>/date=YYYY-MM-DD/<file>, or runs/<run>/<table>/_SUCCESS
        if len(parts) < 3:
            continue
        folders = runs.setdefault(parts[1], set())
        if len(parts) >= 5 and _DATE_FOLDER.match(parts[3]):
            folders.add("/".join(parts[:4]))
    deleted_runs: list[str] = []
    for run, folders in sorted(runs.items()):
        started = run_started(run)
        if started is None or now - started < grace or run in keep_runs:
            continue  # not a run's folder, or a run that may still be writing
        if run not in named_runs:
            store.delete_folder(f"{RUNS}/{run}")
            deleted_runs.append(run)
            continue
        for folder in sorted(folders - named_folders):  # a night of this run that a later run replaced
            store.delete_folder(folder)
            deleted_folders.append(folder)
    published = {n.date for n in kept}
    for day, tables in sorted(legacy_nights(store).items()):  # nights of the earlier layout a later run replaced
        if day not in published:
            continue  # not adopted yet (legacy.adopt): still the only copy of that night
        for table in sorted(tables.values()):
            folder = f"{table}/date={day.isoformat()}"
            if folder not in named_folders:
                store.delete_folder(folder)
                deleted_folders.append(folder)
    return Cleanup(
        expired=tuple(n.date.isoformat() for n in expired), runs=tuple(deleted_runs), folders=tuple(deleted_folders)
    )
