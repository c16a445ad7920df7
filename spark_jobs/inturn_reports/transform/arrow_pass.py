"""The pass over each room partition, in Python over Arrow (``mapInArrow``): the message facts and what the report
tables count of them (``facts.py`` builds the rows and says what each fact means).

Each task takes its partition's rows (Spark shuffled them by room, so a room's rows are all in one partition) as
Arrow batches, and computes with NumPy over the whole partition at once, rooms side by side:

1. the acks known only by platform message id are combined per (room, platform message id);
2. the rows of each message (room, message id, platform) are combined, with the ack group of each event that
   carries the send's platform message id;
3. the messages of each room are put in room order (partition, offset, message id; nulls first) and each compared
   with the one before it that has a device time (``inverted``) or a finished send (``dispatch_violation``);
4. the messages are counted into the rooms table (whole per room), the cells and the latency counts (partial per
   task: ``tables.split`` sums them on the driver).

The output rows have ``SCHEMA``: ``kind`` (``ROOM``, ``CELL``, ``LATENCY``), ``date``, ``platform``, ``mode``;
a room's ``room_id``, ``counts`` (messages, each of ``OUTCOMES``, retries) and ``e2e_p95_ms``; a cell's bucket start
as ``key`` and ``counts`` as a room's; a latency group's measure as ``key`` (0 ack, 1 e2e, 2 device), its distinct
``values``
and in ``counts`` how many messages had each.

Only Spark's public API is used (``DataFrame.mapInArrow``, Spark 3.3 and later; a local or cluster session and Spark
Connect alike).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

#: The kinds of the output rows.
ROOM, CELL, LATENCY = 0, 1, 2
DAY_MS = 86_400_000
#: A null long in the arrays below: above every time, so a minimum ignores it.
_NULL = np.iinfo(np.int64).max
#: An event's mode rides in ``_flags`` in the 8 bits from here (``facts._event_rows`` puts it there): 0 for a null
#: mode, else 1 + its position in ``PassParams.modes`` (0 for a mode not among them).
MODE_SHIFT = 22

SCHEMA = pa.schema(
    [
        pa.field("kind", pa.int32(), nullable=False),
        pa.field("date", pa.date32(), nullable=False),
        pa.field("room_id", pa.string()),
        pa.field("platform", pa.string()),
        pa.field("mode", pa.string()),
        pa.field("key", pa.int64()),
        pa.field("counts", pa.list_(pa.int64()), nullable=False),
        pa.field("values", pa.list_(pa.int64())),
        pa.field("e2e_p95_ms", pa.float64()),
    ]
)
#: The same as a Spark DDL string (``mapInArrow``'s output schema).
DDL = (
    "kind int, date date, room_id string, platform string, mode string, key long, counts array<long>, "
    "values array<long>, e2e_p95_ms double"
)


@dataclass(frozen=True)
class PassParams:
    """What every task needs to know (sent to the Python workers with the function)."""

    from_ms: int
    to_ms: int
    bucket_ms: int
    modes: tuple[str, ...]
    outcomes: int
    masks: tuple[int, ...]  # facts.MASKS, in its order
    level: float
    #: Platforms whose device latency is not measurable (``measurable.without_device_latency``): null for them.
    no_device_latency: tuple[str, ...] = ()


def _longs(column: pa.ChunkedArray | pa.Array) -> I64:
    """A long column as int64 with nulls as ``_NULL``."""
    filled = pc.fill_null(column.cast(pa.int64()), _NULL)
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.int64)


def _codes(column: pa.ChunkedArray, ordered: bool = True) -> tuple[I64, pa.Array]:
    """A string column as codes, -1 for null, and the values by code. ``ordered``: codes that sort as the values do
    (unsigned bytes, as Spark compares strings); otherwise codes that only tell values apart (sorting the values of
    a column of a few hundred thousand distinct ids is a third of encoding it, spent for nothing where only equality
    counts)."""
    encoded = column.combine_chunks().dictionary_encode() if column.num_chunks else pa.array([], pa.string())
    if not isinstance(encoded, pa.DictionaryArray):
        return np.zeros(0, dtype=np.int64), pa.array([], pa.string())
    dictionary = encoded.dictionary
    if not ordered:
        return np.asarray(pc.fill_null(encoded.indices.cast(pa.int64()), -1).to_numpy(), dtype=np.int64), dictionary
    order = np.asarray(pc.sort_indices(dictionary).to_numpy(), dtype=np.int64)
    rank = np.empty(len(dictionary), dtype=np.int64)
    rank[order] = np.arange(len(dictionary), dtype=np.int64)
    indices = np.asarray(pc.fill_null(encoded.indices.cast(pa.int64()), -1).to_numpy(), dtype=np.int64)
    codes = np.where(indices >= 0, rank[np.maximum(indices, 0)], -1)
    return codes, dictionary.take(pa.array(order))


def _hash_codes(column: pa.ChunkedArray) -> I64:
    """A column of 64-bit hashes (``facts._pmid_hash``) as codes that tell its values apart, -1 for null."""
    valid = np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), dtype=np.bool_)
    values = np.asarray(pc.fill_null(column, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    codes = np.full(len(values), -1, dtype=np.int64)
    if valid.any():
        codes[valid] = np.unique(values[valid], return_inverse=True)[1].reshape(-1)
    return codes


def _key(*columns: I64) -> I64:
    """One int64 per row that sorts and groups as the columns do (each a code >= -1)."""
    out = np.zeros(len(columns[0]) if columns else 0, dtype=np.int64)
    for column in columns:
        span = int(column.max()) + 2 if len(column) else 1
        out = out * span + (column + 1)
    return out


def _groups(key: I64) -> tuple[I64, I64, I64]:
    """Rows sorted by ``key`` (stable), the start of each group of equal keys among them, and each row's group."""
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]]) if len(key) else np.zeros(0, np.int64)
    group_of_sorted = np.cumsum(np.r_[False, sorted_key[1:] != sorted_key[:-1]]) if len(key) else starts
    group = np.empty(len(key), dtype=np.int64)
    group[order] = group_of_sorted
    return order, starts.astype(np.int64), group


def _min(values: I64, order: I64, starts: I64) -> I64:
    return np.minimum.reduceat(values[order], starts) if len(starts) else np.zeros(0, np.int64)


def _sum(values: I64, order: I64, starts: I64) -> I64:
    return np.add.reduceat(values[order], starts) if len(starts) else np.zeros(0, np.int64)


def _or(values: I64, order: I64, starts: I64) -> I64:
    return np.bitwise_or.reduceat(values[order], starts) if len(starts) else np.zeros(0, np.int64)


def _segments(reduce: np.ufunc, values: I64, starts: I64) -> I64:
    """``reduce`` over each segment of ``values`` (already in segment order) from one start to the next."""
    reduced: I64 = reduce.reduceat(values, starts) if len(starts) else np.zeros(0, np.int64)
    return reduced


def _where(mask: Bools, values: I64) -> I64:
    return np.where(mask, values, _NULL)


def _previous(valid: Bools, first_of_room: I64) -> I64:
    """For each position (rooms in order, each from ``first_of_room``), the latest earlier position of its room where
    ``valid`` holds, else -1."""
    n = len(valid)
    at = np.where(valid, np.arange(n, dtype=np.int64), -1)
    latest = np.maximum.accumulate(at) if n else at
    before = np.r_[np.int64(-1), latest[:-1]] if n else latest
    return np.where(before >= first_of_room, before, -1)


def _lists(flat: I64, sizes: I64) -> pa.ListArray:
    offsets = np.r_[np.int64(0), np.cumsum(sizes)].astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, pa.int64()))


def _room_order(room: I64, part: I64, offset: I64, message: I64, message_names: pa.Array) -> I64:
    """The order of messages by (room, partition, offset, message id; null ids first), ids compared as Spark compares
    strings. ``message`` holds unordered codes: the ids are compared only among messages that tie on the rest (two
    messages of a room at one offset: none in the worker's events, so this is normally a single sort)."""
    order = np.lexsort((offset, part, room))
    n = len(order)
    if n < 2:
        return order
    r, pa_, o = room[order], part[order], offset[order]
    tied_next = (r[1:] == r[:-1]) & (pa_[1:] == pa_[:-1]) & (o[1:] == o[:-1])
    if not tied_next.any():
        return order
    tied = np.zeros(n, dtype=np.bool_)
    tied[:-1] |= tied_next
    tied[1:] |= tied_next
    at = np.flatnonzero(tied)
    codes = message[order[at]]
    # The tied ids' ranks among themselves, as Spark compares strings (nulls first: rank -1, whatever their place).
    ids = _names(message_names, codes)
    ranks = np.empty(len(at), dtype=np.int64)
    ranks[np.asarray(pc.sort_indices(ids).to_numpy(), dtype=np.int64)] = np.arange(len(at))
    ranks = np.where(codes < 0, -1, ranks)
    tie_rank = np.zeros(n, dtype=np.int64)
    tie_rank[at] = ranks
    resorted: I64 = order[np.lexsort((tie_rank, o, pa_, r))]
    return resorted


def _names(names: pa.Array, codes: I64) -> pa.Array:
    """The values of ``codes`` (from ``_codes``; -1 is null)."""
    return names.take(pa.array(np.maximum(codes, 0), pa.int64(), mask=codes < 0))


def _percentile(values: I64, group: I64, groups: int, level: float) -> pa.Array:
    """Per group, the percentile at ``level`` of its values (``_NULL`` left out) as Spark's ``percentile`` takes it
    (linear interpolation in double arithmetic); null for a group without values."""
    keep = values != _NULL
    v, g = values[keep], group[keep]
    order = np.lexsort((v, g))
    v, g = v[order], g[order]
    counts = np.bincount(g, minlength=groups).astype(np.int64)
    starts = np.r_[np.int64(0), np.cumsum(counts)[:-1]]
    has = counts > 0
    position = (counts - 1).astype(np.float64) * level
    lower, higher = np.floor(position), np.ceil(position)
    lo = v[np.where(has, starts + lower.astype(np.int64), 0)] if len(v) else np.zeros(groups, np.int64)
    hi = v[np.where(has, starts + higher.astype(np.int64), 0)] if len(v) else np.zeros(groups, np.int64)
    lo_f, hi_f = lo.astype(np.float64), hi.astype(np.float64)
    between = (higher - position) * lo_f + (position - lower) * hi_f
    out = np.where(lower == higher, lo_f, between)
    return pa.array(out, pa.float64(), mask=~has)


def run_partition(table: pa.Table, p: PassParams) -> pa.Table:
    """The pass over one partition's rows (the narrow row of ``facts.py``)."""
    ack_row, dispatched_m, terminal_m, retried_m, read_m, failed_m, *rest = p.masks
    acked_m, timeout_m, late_m, dead_m, skipped_m, sent_m = rest
    if table.num_rows == 0:
        return SCHEMA.empty_table()
    room, room_names = _codes(table["room_id"])
    message, message_names = _codes(table["message_id"], ordered=False)  # ordered only where ties need it (3.)
    platform, platform_names = _codes(table["platform"])
    pmid = _hash_codes(table["_pmid"])
    packed = np.asarray(pc.fill_null(table["_flags"], 0).to_numpy(), dtype=np.int64)
    # The mode's field (MODE_SHIFT): 0 null, else 1 + its position; the flags without it.
    mode_field = (packed >> MODE_SHIFT) & 0xFF
    mode = np.where(mode_field == 0, _NULL, mode_field - 1)
    flags = packed & ~np.int64(0xFF << MODE_SHIFT)
    part = _longs(table["partition"])
    offset, created = _longs(table["offset"]), _longs(table["created_at_ms"])
    t1, t2, t3 = _longs(table["_t1"]), _longs(table["_t2"]), _longs(table["_t3"])
    is_ack = (flags & ack_row) != 0

    # 1. The acks known only by platform message id, combined per (room, id). An ack naming neither matches none.
    by_pmid = is_ack & (message < 0)
    ack_group_rows = np.flatnonzero(by_pmid & (pmid >= 0))
    group_key = _key(room[ack_group_rows], pmid[ack_group_rows])
    g_order, g_starts, _ = _groups(group_key)
    g_keys = group_key[g_order][g_starts]
    g_flags = _or(flags[ack_group_rows], g_order, g_starts)
    g1, g2, g3 = (_min(t[ack_group_rows], g_order, g_starts) for t in (t1, t2, t3))

    # 2. Each message's rows combined (every row but those acks), each event with its send's ack group. The rows are
    # put in message order once, so that every reduction below runs over contiguous segments with no gather of its own.
    rows = np.flatnonzero(~by_pmid)
    order, starts, _ = _groups(_key(room[rows], message[rows], platform[rows]))
    rows = rows[order]
    r_ack = is_ack[rows]
    r_event = ~r_ack
    match = np.full(len(rows), -1, dtype=np.int64)
    carries = r_event & (pmid[rows] >= 0)
    if len(g_keys) and carries.any():
        # The same key arithmetic as group_key, over the same spans (all of room's and pmid's codes).
        room_span = int(room[ack_group_rows].max()) + 2
        pmid_span = int(pmid[ack_group_rows].max()) + 2
        r_room, r_pmid = room[rows], pmid[rows]
        inside = carries & (r_room + 1 < room_span) & (r_pmid + 1 < pmid_span)
        wanted = (r_room + 1) * pmid_span + (r_pmid + 1)
        at = np.clip(np.searchsorted(g_keys, wanted), 0, len(g_keys) - 1)
        match = np.where(inside & (g_keys[at] == wanted), at, -1)
    matched = match >= 0
    m_at = np.maximum(match, 0)

    def from_group(values: I64) -> I64:
        return np.where(matched, values[m_at] if len(values) else _NULL, _NULL)

    r_flags = flags[rows] | np.where(matched, g_flags[m_at] if len(g_flags) else 0, 0)
    r_t1, r_t2, r_t3 = t1[rows], t2[rows], t3[rows]
    delivered_r = np.minimum(_where(r_ack, r_t1), from_group(g1))
    sent_ts_r = np.minimum(_where(r_ack, r_t2), from_group(g2))
    first_ack_r = np.minimum(_where(r_ack, r_t3), from_group(g3))
    is_dispatched = r_event & ((flags[rows] & dispatched_m) != 0)
    is_terminal = r_event & ((flags[rows] & terminal_m) != 0)

    first = _segments(np.minimum, _where(r_event, r_t1), starts)
    # Reduced over every message, then only those first seen in the range kept (reduceat's segments run from one
    # start to the next, so the starts are not filtered first).
    keep = (first != _NULL) & (first >= p.from_ms) & (first < p.to_ms)
    if not keep.any():
        return SCHEMA.empty_table()

    def per_message(reduce: np.ufunc, values: I64) -> I64:
        kept: I64 = _segments(reduce, values, starts)[keep]
        return kept

    first = first[keep]
    lead = rows[starts[keep]]  # a row of each message: its room, message id and platform
    m_flags = per_message(np.bitwise_or, r_flags)
    m_mode = per_message(np.minimum, mode[rows])
    m_part = per_message(np.minimum, part[rows])
    m_offset = per_message(np.minimum, offset[rows])
    m_created = per_message(np.minimum, created[rows])
    delivered = per_message(np.minimum, delivered_r)
    sent_ts = per_message(np.minimum, sent_ts_r)
    first_ack = per_message(np.minimum, first_ack_r)
    answered = per_message(np.minimum, _where(r_event, r_t3))
    dispatched = per_message(np.add, is_dispatched.astype(np.int64))
    dispatched_ms = per_message(np.minimum, _where(is_dispatched, r_t2))
    terminal_sent = per_message(np.minimum, _where(is_terminal, r_t2))
    terminal_ms = per_message(np.minimum, _where(is_terminal, r_t1))
    terminal_sends = per_message(np.add, (is_terminal & (r_t2 != _NULL)).astype(np.int64))
    retries = per_message(np.add, (r_event & ((flags[rows] & retried_m) != 0)).astype(np.int64))
    dispatches = np.where(dispatched > 0, dispatched, terminal_sends)
    dispatch_ms = np.where(dispatched_ms != _NULL, dispatched_ms, terminal_sent)
    device = np.where(delivered != _NULL, delivered, sent_ts)
    first_ack = np.where(first_ack != _NULL, first_ack, answered)

    # 3. Room order: partition, offset, message id (nulls first), and each message against the one before it.
    m_room, m_message, m_platform = room[lead], message[lead], platform[lead]

    def nulls_first(values: I64) -> I64:
        return np.where(values == _NULL, np.iinfo(np.int64).min, values)

    in_order = _room_order(m_room, nulls_first(m_part), nulls_first(m_offset), m_message, message_names)
    o_room = m_room[in_order]
    first_of_room = np.maximum.accumulate(np.where(np.r_[True, o_room[1:] != o_room[:-1]], np.arange(len(o_room)), 0))
    o_device, o_dispatch_ms = device[in_order], dispatch_ms[in_order]
    prev_device_at = _previous(o_device != _NULL, first_of_room)
    ended = (dispatches[in_order] > 0) & (terminal_ms[in_order] != _NULL)
    prev_end_at = _previous(ended, first_of_room)
    has_pair = (o_device != _NULL) & (prev_device_at >= 0)
    inverted_o = has_pair & (o_device < o_device[np.maximum(prev_device_at, 0)])
    has_dispatch_pair = (o_dispatch_ms != _NULL) & (prev_end_at >= 0)
    violation_o = has_dispatch_pair & (o_dispatch_ms < terminal_ms[in_order][np.maximum(prev_end_at, 0)])
    back = np.empty(len(in_order), dtype=np.int64)
    back[in_order] = np.arange(len(in_order))
    pair, inverted = has_pair[back], inverted_o[back]
    dispatch_pair, violation = has_dispatch_pair[back], violation_o[back]

    # 4. The outcomes (facts.OUTCOMES' order) and what the tables count of them.
    def bit(mask: int) -> Bools:
        return np.asarray((m_flags & mask) != 0)

    outcomes = [
        dispatches > 0,
        (delivered != _NULL) | bit(read_m),
        bit(acked_m),
        bit(timeout_m),
        bit(late_m),
        bit(dead_m),
        bit(skipped_m),
        bit(sent_m),
        dispatches > 1,
        bit(failed_m),
        device == _NULL,
        pair,
        inverted,
        dispatch_pair,
        violation,
    ]
    n_counts = p.outcomes + 2
    counts = np.zeros((len(first), n_counts), dtype=np.int64)
    counts[:, 0] = 1
    for i, yes in enumerate(outcomes):
        counts[:, i + 1] = yes
    counts[:, -1] = retries
    date = np.floor_divide(first, DAY_MS)
    mode_key = np.where((m_mode == _NULL) | (m_mode < 1) | (m_mode > len(p.modes)), 0, m_mode)
    ack_latency = np.where((first_ack == _NULL) | (dispatch_ms == _NULL), _NULL, first_ack - dispatch_ms)
    created_ok = m_created != _NULL
    e2e_latency = np.where((first_ack == _NULL) | ~created_ok, _NULL, first_ack - m_created)
    # From the send to the device, as the platform timed it; none where the platform cannot time it.
    blind_code = np.array([name in p.no_device_latency for name in platform_names.to_pylist()], dtype=np.bool_)
    blind = (m_platform >= 0) & blind_code[np.maximum(m_platform, 0)] if len(blind_code) else m_platform < -1
    device_latency = np.where((device == _NULL) | (dispatch_ms == _NULL) | blind, _NULL, device - dispatch_ms)
    bucket = np.floor_divide(first, p.bucket_ms) * p.bucket_ms

    mode_names: list[str | None] = [None, *p.modes]
    parts: list[pa.Table] = []

    def labels(dates: I64, platforms: I64, modes: I64) -> dict[str, pa.Array]:
        return {
            "date": pa.array(dates.astype(np.int32), pa.int32()).cast(pa.date32()),
            "platform": _names(platform_names, platforms),
            "mode": pa.array([mode_names[c] for c in modes.tolist()], pa.string()),
        }

    def output(kind: int, n: int, columns: dict[str, pa.Array]) -> pa.Table:
        full = {
            "kind": pa.array(np.full(n, kind, dtype=np.int32)),
            "room_id": pa.nulls(n, pa.string()),
            "key": pa.nulls(n, pa.int64()),
            "values": pa.nulls(n, pa.list_(pa.int64())),
            "e2e_p95_ms": pa.nulls(n, pa.float64()),
            **columns,
        }
        return pa.table({f.name: full[f.name] for f in SCHEMA}, schema=SCHEMA)

    # The rooms table: one row per room, day, platform and mode.
    day0 = int(date.min())
    r_order, r_starts, r_group = _groups(_key(m_room, date - day0, m_platform, mode_key))
    r_lead = r_order[r_starts]
    room_counts = np.add.reduceat(counts[r_order], r_starts, axis=0)
    p95 = _percentile(e2e_latency, r_group, len(r_starts), p.level)
    n_rooms = len(r_starts)
    parts.append(output(ROOM, n_rooms, {
        **labels(date[r_lead], m_platform[r_lead], mode_key[r_lead]),
        "room_id": _names(room_names, m_room[r_lead]),
        "counts": _lists(room_counts.reshape(-1), np.full(n_rooms, n_counts, dtype=np.int64)),
        "e2e_p95_ms": p95,
    }))  # fmt: skip

    # The cells: per day, platform, mode and timeline bucket.
    c_order, c_starts, _ = _groups(_key(date - day0, m_platform, mode_key, (bucket - int(bucket.min())) // p.bucket_ms))
    c_lead = c_order[c_starts]
    cell_counts = np.add.reduceat(counts[c_order], c_starts, axis=0)
    parts.append(output(CELL, len(c_starts), {
        **labels(date[c_lead], m_platform[c_lead], mode_key[c_lead]),
        "key": pa.array(bucket[c_lead], pa.int64()),
        "counts": _lists(cell_counts.reshape(-1), np.full(len(c_starts), n_counts, dtype=np.int64)),
    }))  # fmt: skip

    # The latency counts: per day, platform, mode and measure, the distinct values and how many had each.
    for measure, latency in enumerate((ack_latency, e2e_latency, device_latency)):
        has = np.flatnonzero(latency != _NULL)
        if not len(has):
            continue
        group = _key(date[has] - day0, m_platform[has], mode_key[has])
        value_order = np.lexsort((latency[has], group))
        g_sorted, v_sorted = group[value_order], latency[has][value_order]
        new_value = np.r_[True, (g_sorted[1:] != g_sorted[:-1]) | (v_sorted[1:] != v_sorted[:-1])]
        value_starts = np.flatnonzero(new_value)
        value_counts = np.diff(np.r_[value_starts, len(v_sorted)])
        value_group = g_sorted[value_starts]
        group_starts = np.flatnonzero(np.r_[True, value_group[1:] != value_group[:-1]])
        sizes = np.diff(np.r_[group_starts, len(value_group)])
        lead_rows = has[value_order[value_starts[group_starts]]]
        parts.append(output(LATENCY, len(group_starts), {
            **labels(date[lead_rows], m_platform[lead_rows], mode_key[lead_rows]),
            "key": pa.array(np.full(len(group_starts), measure, dtype=np.int64)),
            "counts": _lists(value_counts.astype(np.int64), sizes),
            "values": _lists(v_sorted[value_starts], sizes),
        }))  # fmt: skip
    return pa.concat_tables(parts)


def run_batches(batches: Iterator[pa.RecordBatch], p: PassParams) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``'s function: the partition's batches in, the pass's rows out."""
    read = list(batches)
    if not read:  # an empty partition
        return
    table = pa.Table.from_batches(read)
    yield from run_partition(table, p).to_batches()
