"""The pass's room order (``arrow_pass._room_order``): by room, partition, offset, then message id as Spark compares
strings, nulls first. The ids are compared only where the rest ties; the expected order here is Python's own sort of
the same tuples, computed apart from the pass."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from inturn_reports.transform import facts
from inturn_reports.transform.arrow_pass import MODE_SHIFT, _codes, _room_order

Row = tuple[str, int | None, int | None, str | None]  # room, partition, offset, message id


def _order(rows: Sequence[Row]) -> list[int]:
    rooms, _ = _codes(pa.chunked_array([pa.array([r[0] for r in rows])]))
    ids, names = _codes(pa.chunked_array([pa.array([r[3] for r in rows])]), ordered=False)

    def longs(values: list[int | None]) -> npt.NDArray[np.int64]:
        return np.array([np.iinfo(np.int64).min if v is None else v for v in values], dtype=np.int64)

    part, offset = longs([r[1] for r in rows]), longs([r[2] for r in rows])
    return [int(i) for i in _room_order(rooms, part, offset, ids, names)]


def _expected(rows: Sequence[Row]) -> list[int]:
    def key(i: int) -> tuple[bytes, int, int, int, bytes]:
        room, part, offset, message = rows[i]
        low = -(2**63)
        return (room.encode(), low if part is None else part, low if offset is None else offset,
                0 if message is None else 1, (message or "").encode())  # fmt: skip

    return sorted(range(len(rows)), key=key)


def test_without_ties_the_order_is_room_partition_offset() -> None:
    rows: list[Row] = [("r2", 0, 5, "b"), ("r1", 1, 3, "z"), ("r1", 0, 9, "a"), ("r2", 0, 1, "c"), ("r1", 1, 2, "y")]
    assert _order(rows) == _expected(rows) == [2, 4, 1, 3, 0]


def test_messages_tied_on_partition_and_offset_are_ordered_by_id_as_bytes_with_null_first() -> None:
    # Tied groups in two rooms; ids that sort differently as bytes than by their insertion order; a null id; an id
    # with a character above ASCII (Spark compares UTF-8 bytes, so "é" comes after "z").
    rows: list[Row] = [
        ("r1", 0, 7, "m-10"), ("r1", 0, 7, "m-9"), ("r1", 0, 7, None), ("r1", 0, 3, "m-1"),
        ("r2", None, None, "é"), ("r2", None, None, "z"), ("r2", 1, 1, "a"), ("r1", 0, 7, "m-0"),
    ]  # fmt: skip
    assert _order(rows) == _expected(rows)
    assert _order(rows)[:5] == [3, 2, 7, 0, 1], "r1 at offset 7: null, then m-0, m-10, m-9 as bytes"


def test_the_mode_field_of_the_flags_overlaps_no_flag_bit() -> None:
    """An event's mode rides in ``_flags`` (``MODE_SHIFT``, 8 bits): above every event and ack bit, below
    ``_ACK_ROW``, and wide enough for 1 + every mode's position."""
    field = 0xFF << MODE_SHIFT
    for bit in [*facts._EVENT_BIT.values(), *facts._ACK_BIT.values(), facts._ACK_ROW]:
        assert bit & field == 0, hex(bit)
    assert len(facts._MODES) + 1 <= 0xFF
    assert facts._ACK_ROW < 2**31, "_flags is a Spark int"
