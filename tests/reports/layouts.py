"""Output folders as earlier versions of the report left them, built here (not by the code under test)."""

from __future__ import annotations

import datetime as dt
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from inturn_reports.storage import ObjectStore
from inturn_reports.transform import SCHEMAS


def row_value(field: pa.Field, day: dt.date, mark: int) -> object:
    """A value of ``field`` for a row of night ``day``: ``messages`` is ``mark`` (it tells which write a read
    returns), the room ``room-1``, the platform ``whatsapp``."""
    if field.name == "date":
        return day
    if field.name == "messages":
        return mark
    if pa.types.is_string(field.type):
        return {"room_id": "room-1", "platform": "whatsapp", "mode": "ack", "measure": "ack"}.get(field.name, "x")
    if pa.types.is_floating(field.type):
        return 0.5
    return 1


def legacy_night(store: ObjectStore, day: dt.date, mark: int) -> None:
    """A night as the report wrote it before manifests (before 2026-11-28): ``<out>/<table>/date=<day>/`` straight
    under the output, one row a table, the date only in the folder's name, with Spark's file names, a hidden
    checksum file beside the data and ``_SUCCESS``."""
    for name, schema in SCHEMAS.items():
        rows = pa.Table.from_pylist([{f.name: row_value(f, day, mark) for f in schema}], schema).drop_columns(["date"])
        folder = f"{name}/date={day.isoformat()}"
        sink = pa.BufferOutputStream()
        pq.write_table(rows, sink, compression="snappy")
        store.write(f"{folder}/part-00000-{uuid.uuid4()}.c000.snappy.parquet", sink.getvalue().to_pybytes())
        store.write(f"{folder}/.part-00000-{uuid.uuid4()}.c000.snappy.parquet.crc", b"not parquet")
        store.write(f"{name}/_SUCCESS", b"")
