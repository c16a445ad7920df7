"""The report's numbers worked out in plain Python, straight from the records (no Spark, no report code).

Definitions follow docs/reports.md; this is the second, independent reading of them.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inturn.schemas import Ack, Event
from inturn_reports.transform.measurable import not_measurable  # only the notes' wording; nulls are decided here

EDGES = (10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
TERMINAL = {"acked", "ack_timeout", "dead_lettered", "skipped_duplicate", "sent"}
#: Platforms whose callbacks cannot order messages (Messenger's watermark; synchronous answers), and those that
#: report no delivery (synchronous answers): the report gives those figures as null with a note, never 0.
NO_ORDER = {"messenger", "instagram", "telegram"}
NO_DELIVERY = {"instagram", "telegram"}
#: Platforms that cannot time the device (issue 39: the device latency is computed only from what the platform
#: reports): Messenger's watermark bounds the sends it covers, synchronous answers report no device time.
NO_DEVICE_TIME = {"messenger", "instagram", "telegram"}
MEASURES = ("ack", "e2e", "device")


def blind(row: dict[str, Any], delivered: bool = True, device: bool = False) -> dict[str, Any]:
    """``row`` of a platform with what it cannot report as the report gives it: null, with the reason."""
    platform = row["platform"]
    if device:
        row["device_latency_note"] = not_measurable(platform, "device_latency")
        assert (row["device_latency_note"] is not None) == (platform in NO_DEVICE_TIME), platform
    row["out_of_order_note"] = not_measurable(platform, "out_of_order")
    assert (row["out_of_order_note"] is not None) == (platform in NO_ORDER), platform
    if platform in NO_ORDER:
        row["pairs"] = row["inverted"] = row["out_of_order_rate"] = None
    if delivered:
        row["delivered_note"] = not_measurable(platform, "delivered")
        assert (row["delivered_note"] is not None) == (platform in NO_DELIVERY), platform
        if platform in NO_DELIVERY:
            row["delivered"] = row["delivered_rate"] = None
    return row


@dataclass
class Msg:
    """What the oracle knows of one message."""

    room: str
    msg: str
    platform: str
    mode: str
    partition: int
    offset: int
    first_ts: int
    created: int | None
    types: list[str]
    dispatches: int
    dispatch_ms: int | None
    terminal_ms: int | None
    delivered_ts: int | None = None
    sent_ts: int | None = None
    read: bool = False
    failed: bool = False
    first_ack: int | None = None
    inverted: bool | None = None
    violation: bool | None = None

    @property
    def date(self) -> dt.date:
        return dt.datetime.fromtimestamp(self.first_ts / 1000, dt.UTC).date()

    @property
    def device(self) -> int | None:
        return self.delivered_ts if self.delivered_ts is not None else self.sent_ts

    def n(self, kind: str) -> int:
        return self.types.count(kind)

    def latency(self, measure: str) -> int | None:
        if measure == "device":  # from the send to the device, where the platform times the device
            if self.platform in NO_DEVICE_TIME or self.device is None or self.dispatch_ms is None:
                return None
            return self.device - self.dispatch_ms
        start = self.dispatch_ms if measure == "ack" else self.created
        return None if self.first_ack is None or start is None else self.first_ack - start


def percentile(values: list[int], p: float) -> float | None:
    """Linear interpolation between the closest ranks (Hyndman-Fan type 7)."""
    if not values:
        return None
    s = sorted(values)
    pos = p * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def by_night(
    events: list[Event], acks: list[Ack], ranges: list[tuple[int, int]], grace_ms: int
) -> dict[dt.date, list[Msg]]:
    """The messages of runs over ``ranges``, night by night: each run read the records timed inside
    [start, end + grace) (events by ``ts_ms``, acks by ``received_at_ms``), and its nights are its messages' days."""
    nights: dict[dt.date, list[Msg]] = {}
    for start, end in ranges:
        seen_events = [e for e in events if start <= e.ts_ms < end + grace_ms]
        seen_acks = [a for a in acks if start <= a.received_at_ms < end + grace_ms]
        for m in messages(seen_events, seen_acks, start, end):
            nights.setdefault(m.date, []).append(m)
    return nights


def messages(events: list[Event], acks: list[Ack], from_ms: int, to_ms: int) -> list[Msg]:
    """Every message whose first event is in [from_ms, to_ms), with its acks and room-order verdicts."""
    by_key: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in events:
        by_key[(e.room_id, e.message_id)].append(e)
    # An ack that does not name its message belongs to the message of its own room whose send has its platform
    # message id (on the dispatched event, and on the terminal event too).
    owner: dict[tuple[str, str], tuple[str, str]] = {}
    for e in events:
        if (e.type == "dispatched" or e.type in TERMINAL) and e.platform_message_id:
            owner.setdefault((e.room_id, e.platform_message_id), (e.room_id, e.message_id))
    out: dict[tuple[str, str], Msg] = {}
    for key, evs in by_key.items():
        dispatch = [e.sent_at_ms if e.sent_at_ms is not None else e.ts_ms for e in evs if e.type == "dispatched"]
        if not dispatch:  # events without dispatched ones: the terminal event says when it was sent
            dispatch = [e.sent_at_ms for e in evs if e.type in TERMINAL and e.sent_at_ms is not None]
        terminal = [e.ts_ms for e in evs if e.type in TERMINAL]
        created = [e.created_at_ms for e in evs if e.created_at_ms is not None]
        out[key] = Msg(
            room=key[0], msg=key[1], platform=min(e.platform for e in evs), mode=min(e.mode.value for e in evs),
            partition=min(e.partition for e in evs), offset=min(e.offset for e in evs),
            first_ts=min(e.ts_ms for e in evs), created=min(created) if created else None,
            types=[e.type.value for e in evs], dispatches=len(dispatch),
            dispatch_ms=min(dispatch) if dispatch else None, terminal_ms=min(terminal) if terminal else None,
        )  # fmt: skip
    for a in acks:
        key = (a.room_id, a.message_id) if a.message_id is not None else owner.get((a.room_id, a.platform_message_id))  # type: ignore[assignment]  # None when unowned
        m = out.get(key) if key else None
        if m is None or (a.message_id is not None and a.platform != m.platform):
            continue  # no such message, or an ack naming it from another platform
        ts = a.platform_ts_ms
        if a.status == "delivered":
            m.delivered_ts = ts if m.delivered_ts is None else min(m.delivered_ts, ts)
        if a.status == "sent":
            m.sent_ts = ts if m.sent_ts is None else min(m.sent_ts, ts)
        m.read |= a.status == "read"
        m.failed |= a.status == "failed"
        if a.status != "failed":
            m.first_ack = a.received_at_ms if m.first_ack is None else min(m.first_ack, a.received_at_ms)
    kept = [m for m in out.values() if from_ms <= m.first_ts < to_ms]
    rooms: dict[str, list[Msg]] = defaultdict(list)
    for m in kept:
        rooms[m.room].append(m)
    for msgs in rooms.values():
        msgs.sort(key=lambda m: (m.partition, m.offset, m.msg))
        last_device: int | None = None
        last_terminal: int | None = None
        for m in msgs:
            if m.device is not None and last_device is not None:
                m.inverted = m.device < last_device
            if m.dispatch_ms is not None and last_terminal is not None:
                m.violation = m.dispatch_ms < last_terminal
            if m.device is not None:
                last_device = m.device
            if m.dispatches > 0 and m.terminal_ms is not None:
                last_terminal = m.terminal_ms
    return kept


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def summary(msgs: list[Msg]) -> list[dict[str, Any]]:
    """The summary table's rows."""
    groups: dict[tuple[dt.date, str, str], list[Msg]] = defaultdict(list)
    for m in msgs:
        groups[(m.date, m.platform, m.mode)].append(m)
    rows = []
    for (date, platform, mode), ms in groups.items():
        count = len(ms)
        row: dict[str, Any] = {
            "date": date, "platform": platform, "mode": mode, "messages": count,
            "dispatched": sum(m.dispatches > 0 for m in ms),
            "delivered": sum(m.delivered_ts is not None or m.read for m in ms),
            "acked": sum(m.n("acked") > 0 for m in ms),
            "ack_timeouts": sum(m.n("ack_timeout") > 0 for m in ms),
            "late_acks": sum(m.n("late_ack") > 0 for m in ms),
            "retries": sum(m.n("retried") for m in ms),
            "dead_letters": sum(m.n("dead_lettered") > 0 for m in ms),
            "skipped_duplicates": sum(m.n("skipped_duplicate") > 0 for m in ms),
            "sent_unacked": sum(m.n("sent") > 0 for m in ms),
            "duplicates": sum(m.dispatches > 1 for m in ms),
            "failed": sum(m.failed for m in ms),
            "no_device_ts": sum(m.device is None for m in ms),
        }  # fmt: skip
        for measure in MEASURES:
            values = [v for m in ms if (v := m.latency(measure)) is not None]
            for p in (50, 95, 99):
                row[f"{measure}_p{p}_ms"] = percentile(values, p / 100)
        row["pairs"] = sum(m.inverted is not None for m in ms)
        row["inverted"] = sum(m.inverted is True for m in ms)
        row["dispatch_pairs"] = sum(m.violation is not None for m in ms)
        row["dispatch_violations"] = sum(m.violation is True for m in ms)
        for name, part in [("delivered_rate", "delivered"), ("ack_rate", "acked"), ("timeout_rate", "ack_timeouts"),
                           ("late_ack_rate", "late_acks"), ("dead_letter_rate", "dead_letters"),
                           ("duplicate_rate", "duplicates")]:  # fmt: skip
            row[name] = _rate(row[part], count)
        row["out_of_order_rate"] = _rate(row["inverted"], row["pairs"])
        rows.append(blind(row, device=True))
    return rows


def rooms(msgs: list[Msg]) -> list[dict[str, Any]]:
    """The rooms table's rows."""
    groups: dict[tuple[dt.date, str, str, str], list[Msg]] = defaultdict(list)
    for m in msgs:
        groups[(m.date, m.room, m.platform, m.mode)].append(m)
    rows = []
    for (date, room, platform, mode), ms in groups.items():
        pairs = sum(m.inverted is not None for m in ms)
        inverted = sum(m.inverted is True for m in ms)
        e2e = [v for m in ms if (v := m.latency("e2e")) is not None]
        rows.append(blind({
            "date": date, "room_id": room, "platform": platform, "mode": mode, "messages": len(ms),
            "ack_timeouts": sum(m.n("ack_timeout") > 0 for m in ms), "late_acks": sum(m.n("late_ack") > 0 for m in ms),
            "dead_letters": sum(m.n("dead_lettered") > 0 for m in ms), "pairs": pairs, "inverted": inverted,
            "dispatch_violations": sum(m.violation is True for m in ms),
            "e2e_p95_ms": percentile(e2e, 0.95), "out_of_order_rate": _rate(inverted, pairs),
        }, delivered=False))  # fmt: skip
    return rows


def worst_rooms(room_rows: list[dict[str, Any]], top_n: int) -> list[dict[str, Any]]:
    """The worst-rooms table's rows."""
    rows = []
    measures: list[tuple[str, Callable[[dict[str, Any]], bool]]] = [
        ("out_of_order_rate", lambda r: (r["inverted"] or 0) > 0),
        ("ack_timeouts", lambda r: r["ack_timeouts"] > 0),
        ("e2e_p95_ms", lambda r: (r["e2e_p95_ms"] or 0) > 0),
    ]
    for measure, keep in measures:
        for date in {r["date"] for r in room_rows}:
            cands = sorted((r for r in room_rows if r["date"] == date and keep(r)),
                           key=lambda r: (-float(r[measure]), r["room_id"]))  # fmt: skip
            for rank, r in enumerate(cands[:top_n], start=1):
                rows.append({"date": date, "measure": measure, "rank": rank, "room_id": r["room_id"],
                             "platform": r["platform"], "mode": r["mode"], "value": float(r[measure])})  # fmt: skip
    return rows


def timeline(msgs: list[Msg], bucket_ms: int) -> list[dict[str, Any]]:
    """The timeline table's rows."""
    groups: dict[tuple[dt.date, int, str], list[Msg]] = defaultdict(list)
    for m in msgs:
        groups[(m.date, m.first_ts // bucket_ms * bucket_ms, m.mode)].append(m)
    return [
        {"date": d, "bucket_start_ms": b, "mode": mode, "messages": len(ms),
         "acked": sum(m.n("acked") > 0 for m in ms), "sent_unacked": sum(m.n("sent") > 0 for m in ms),
         "ack_timeouts": sum(m.n("ack_timeout") > 0 for m in ms), "late_acks": sum(m.n("late_ack") > 0 for m in ms),
         "dead_letters": sum(m.n("dead_lettered") > 0 for m in ms)}
        for (d, b, mode), ms in groups.items()
    ]  # fmt: skip


def latency_histogram(msgs: list[Msg]) -> list[dict[str, Any]]:
    """The latency histogram's rows."""
    counts: dict[tuple[dt.date, str, str, int | None], int] = defaultdict(int)
    for m in msgs:
        for measure in MEASURES:
            v = m.latency(measure)
            if v is not None:
                upper = next((e for e in EDGES if v <= e), None)
                counts[(m.date, m.mode, measure, upper)] += 1
    return [
        {"date": d, "mode": mo, "measure": me, "upper_ms": u, "messages": n} for (d, mo, me, u), n in counts.items()
    ]


def platforms(msgs: list[Msg]) -> list[dict[str, Any]]:
    """The platforms table's rows (per day and platform, every mode together)."""
    groups: dict[tuple[dt.date, str], list[Msg]] = defaultdict(list)
    for m in msgs:
        groups[(m.date, m.platform)].append(m)
    rows = []
    for (date, platform), ms in groups.items():
        delivered = sum(m.delivered_ts is not None or m.read for m in ms)
        pairs, inverted = sum(m.inverted is not None for m in ms), sum(m.inverted is True for m in ms)
        e2e = [v for m in ms if (v := m.latency("e2e")) is not None]
        rows.append(blind({
            "date": date, "platform": platform, "messages": len(ms), "delivered": delivered,
            "ack_timeouts": sum(m.n("ack_timeout") > 0 for m in ms), "pairs": pairs, "inverted": inverted,
            "e2e_p99_ms": percentile(e2e, 0.99), "delivered_rate": _rate(delivered, len(ms)),
            "out_of_order_rate": _rate(inverted, pairs),
        }))  # fmt: skip
    return rows


def worst_rooms_of_the_nights(msgs: list[Msg], top_n: int) -> list[dict[str, Any]]:
    """The worst rooms over every night of ``msgs`` together, by out-of-order rate and by ack timeouts."""
    groups: dict[tuple[str, str, str], list[Msg]] = defaultdict(list)
    for m in msgs:
        groups[(m.room, m.platform, m.mode)].append(m)
    per_room: list[dict[str, Any]] = []
    for (room, platform, mode), ms in groups.items():
        pairs, inverted = sum(m.inverted is not None for m in ms), sum(m.inverted is True for m in ms)
        per_room.append({
            "room_id": room, "platform": platform, "mode": mode, "nights": len({m.date for m in ms}),
            "messages": len(ms), "pairs": pairs, "out_of_order_rate": _rate(inverted, pairs),
            "ack_timeouts": sum(m.n("ack_timeout") > 0 for m in ms),
        })  # fmt: skip
        if platform in NO_ORDER:
            per_room[-1]["out_of_order_rate"] = None
    rows = []
    for measure in ("out_of_order_rate", "ack_timeouts"):
        taking_part = (r for r in per_room if (r[measure] or 0) > 0)
        ranked = sorted(taking_part, key=lambda r: (-float(r[measure]), r["room_id"]))
        for rank, r in enumerate(ranked[:top_n], start=1):
            rows.append({"measure": measure, "rank": rank, "room_id": r["room_id"], "platform": r["platform"],
                         "mode": r["mode"], "nights": r["nights"], "messages": r["messages"],
                         "value": float(r[measure])})  # fmt: skip
    return rows
