"""The figures of the benchmark matrix, computed from what the platform simulator and the worker recorded.

Pure functions over plain records, so they can be checked on hand-made data:

- receipts: the simulator's receipt log (``seq``, ``room_id``, ``message_id``, ``accepted_at_ms`` when the
  send was accepted, ``delivered_at_ms`` when the drawn latency had passed, ``duplicate``);
- events: the worker's records on the events topic, decoded to dicts (``type``, ``room_id``, ``message_id``,
  ``partition``, ``offset``, ``ts_ms``, ``consumed_at_ms``, ``sent_at_ms``, ``acked_at_ms``).

Throughput is counted from the receipts (what reached the platform), never from the worker's counters.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from inturn_devtools.receipts import Report

#: Event types after which a room (and in 'partition' mode its partition) may send its next message.
TERMINAL = frozenset({"acked", "ack_timeout", "dead_lettered", "skipped_duplicate", "sent"})


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0 < q <= 100) of ``values``; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


def spread(values: Sequence[float]) -> dict[str, Any]:
    """p50, p99 and how many values they were taken from."""
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "n": len(values)}


def accepted_in(receipts: Iterable[Mapping[str, Any]], start_ms: int, end_ms: int) -> int:
    """First deliveries of inturn's messages whose send the platform accepted in [start_ms, end_ms)."""
    return sum(
        1
        for r in receipts
        if r.get("room_id") is not None and not r.get("duplicate") and start_ms <= r["accepted_at_ms"] < end_ms
    )


def latencies(
    events: Sequence[Mapping[str, Any]],
    receipts: Iterable[Mapping[str, Any]],
    start_ms: int,
    end_ms: int,
    *,
    partition_turns: bool,
) -> dict[str, Any]:
    """Added latency of the messages sent in [start_ms, end_ms), in milliseconds.

    - ``consumed_to_sent`` and ``turn_to_sent``: see ``turn_delays``.
    - ``ack_at_webhook_minus_injected``: (acked_at_ms - sent_at_ms) - (delivered_at_ms - accepted_at_ms):
      the ack's round trip as the webhook received it, minus the latency the simulator injected.
    - ``ack_at_worker_minus_injected``: the same with the ``acked`` event's ts_ms (when the worker had the
      ack from the acks topic and resolved the message) instead of the webhook's acked_at_ms.
    - the latter in three parts: ``send_to_accepted`` (accepted_at_ms - sent_at_ms: the worker's wait for a
      pooled HTTP connection and the request), ``delivered_to_webhook`` (acked_at_ms - delivered_at_ms: the
      simulator's callback and the webhook) and ``webhook_to_worker`` (ts_ms - acked_at_ms: Kafka and the
      worker's ack reader).
    """
    consumed_to_sent, turn_to_sent = turn_delays(events, start_ms, end_ms, partition_turns=partition_turns)

    receipt_times: dict[tuple[str, str], tuple[int, int]] = {}  # (room, message) -> (accepted_at_ms, delivered_at_ms)
    for r in receipts:
        if r.get("room_id") is not None and not r.get("duplicate"):
            receipt_times[(r["room_id"], r["message_id"])] = (r["accepted_at_ms"], r["delivered_at_ms"])
    at_webhook: list[float] = []
    at_worker: list[float] = []
    send_to_accepted: list[float] = []
    delivered_to_webhook: list[float] = []
    webhook_to_worker: list[float] = []
    timeouts = 0
    for e in events:
        sent = e.get("sent_at_ms")
        if sent is None or not start_ms <= sent < end_ms:
            continue
        if e["type"] == "ack_timeout":
            timeouts += 1
        elif e["type"] == "acked" and (stamp := receipt_times.get((e["room_id"], e["message_id"]))) is not None:
            accepted, delivered = stamp
            drawn = delivered - accepted
            at_webhook.append(e["acked_at_ms"] - sent - drawn)
            at_worker.append(e["ts_ms"] - sent - drawn)
            send_to_accepted.append(accepted - sent)
            delivered_to_webhook.append(e["acked_at_ms"] - delivered)
            webhook_to_worker.append(e["ts_ms"] - e["acked_at_ms"])
    return {
        "consumed_to_sent_ms": spread(consumed_to_sent),
        "turn_to_sent_ms": spread(turn_to_sent),
        "ack_at_webhook_minus_injected_ms": spread(at_webhook),
        "ack_at_worker_minus_injected_ms": spread(at_worker),
        "send_to_accepted_ms": spread(send_to_accepted),
        "delivered_to_webhook_ms": spread(delivered_to_webhook),
        "webhook_to_worker_ms": spread(webhook_to_worker),
        "ack_timeouts": timeouts,
    }


def message_records(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One record per message with a send or a terminal event: room, partition, offset, sent_at_ms and
    consumed_at_ms (None when never sent), and the ts_ms of its terminal event (None while it has none).

    Both shapes of the worker's events are read: a ``dispatched`` event when the send was accepted followed by a
    terminal event, or one terminal event per message carrying ``sent_at_ms`` and ``consumed_at_ms`` itself. A
    field missing from one event of a message is taken from the other."""
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    for e in events:
        kind = e.get("type")
        if kind != "dispatched" and kind not in TERMINAL:
            continue
        m = merged.setdefault(
            (e["room_id"], e["offset"]),
            {
                "room_id": e["room_id"],
                "partition": e.get("partition"),
                "offset": e["offset"],
                "sent_at_ms": None,
                "consumed_at_ms": None,
                "terminal_ms": None,
            },
        )
        for field in ("sent_at_ms", "consumed_at_ms"):
            if e.get(field) is not None:
                m[field] = e[field]
        if kind in TERMINAL:
            m["terminal_ms"] = e["ts_ms"]
    return list(merged.values())


def turn_delays(
    events: Iterable[Mapping[str, Any]], start_ms: int, end_ms: int, *, partition_turns: bool = False
) -> tuple[list[float], list[float]]:
    """For the messages sent in [start_ms, end_ms), in milliseconds:

    - consumed to sent: sent_at_ms - consumed_at_ms. Under a standing backlog this is mostly the wait behind
      the room's earlier messages.
    - turn to sent: sent_at_ms minus the moment the message's turn came, the later of its consumed_at_ms and
      the terminal event's ts_ms of the room's previous message (the one of the next lower offset; with
      ``partition_turns``, also the partition's latest terminal event before the send: 'partition' mode has
      one in flight per partition). The worker's own delay, from its own events.
    """
    messages = message_records(events)
    room_terminals: dict[str, list[tuple[int, int]]] = {}  # room -> sorted (offset, terminal ts_ms)
    partition_terminals: dict[int, list[int]] = {}  # partition -> sorted terminal ts_ms
    for m in messages:
        if m["terminal_ms"] is not None:
            room_terminals.setdefault(m["room_id"], []).append((m["offset"], m["terminal_ms"]))
            partition_terminals.setdefault(m["partition"], []).append(m["terminal_ms"])
    for terminals in room_terminals.values():
        terminals.sort()
    for stamps in partition_terminals.values():
        stamps.sort()
    consumed_to_sent: list[float] = []
    turn_to_sent: list[float] = []
    for m in messages:
        sent = m["sent_at_ms"]
        if sent is None or not start_ms <= sent < end_ms or m["consumed_at_ms"] is None:
            continue
        consumed_to_sent.append(sent - m["consumed_at_ms"])
        turn = m["consumed_at_ms"]
        earlier = room_terminals.get(m["room_id"], [])
        i = bisect.bisect_left(earlier, (m["offset"], -1))
        if i > 0:
            turn = max(turn, earlier[i - 1][1])
        if partition_turns:
            stamps = partition_terminals.get(m["partition"], [])
            j = bisect.bisect_right(stamps, sent)
            if j > 0:
                turn = max(turn, stamps[j - 1])
        turn_to_sent.append(sent - turn)
    return consumed_to_sent, turn_to_sent


def verdict(
    report: Report,
    produced: Mapping[str, Sequence[str]],
    receipts: Iterable[Mapping[str, Any]],
    ack_timeout_ms: int | None = None,
) -> dict[str, int]:
    """The receipt checker's totals for a run stopped before its backlog drained.

    ``lost`` counts only messages missing before a later message of the same room that did arrive (a
    gap); messages after a room's last arrival are ``not_yet_sent`` when the measurement stopped.
    With ``ack_timeout_ms``, ``reordered_past_timeout`` says how many of the inversions are the ones ack mode
    allows (see ``reordered_past_timeout``).
    """
    receipts = list(receipts)
    position = {room: {m: i for i, m in enumerate(ids)} for room, ids in produced.items()}
    last: dict[str, int] = {}
    for r in receipts:
        room, message = r.get("room_id"), r.get("message_id")
        if room is None or message is None:
            continue
        index = position.get(room, {}).get(message)
        if index is not None:
            last[room] = max(last.get(room, -1), index)
    gaps = sum(
        1
        for room, rr in report.rooms.items()
        for m in rr.lost
        if position.get(room, {}).get(m, math.inf) < last.get(room, -1)
    )
    counted = {
        "produced": report.produced,
        "received": report.produced - report.lost,
        "lost": gaps,
        "not_yet_sent": report.lost - gaps,
        "reordered": report.reordered,
        "duplicated": report.duplicated,
        "unexpected": report.unexpected,
    }
    if ack_timeout_ms is not None:
        counted["reordered_past_timeout"] = reordered_past_timeout(receipts, position, ack_timeout_ms)
    return counted


def reordered_past_timeout(
    receipts: Iterable[Mapping[str, Any]], position: Mapping[str, Mapping[str, int]], ack_timeout_ms: int
) -> int:
    """Of the checker's inversions (adjacent pairs of first receptions, in device order, against room order),
    those whose earlier message spent longer than the ack timeout between the platform's acceptance and the
    device, both read from the simulator's receipt (``delivered_at_ms - accepted_at_ms``).

    Ack mode sends N+1 after N's ack or N's timeout (docs/ordering-modes.md). A platform calls back when it
    delivered, so a message still in transit when its timeout ended had no ack in time however fast the
    callback path was, and the next message may reach the device first: the order ack mode promises only
    when the platform is faster than the timeout. An inversion whose earlier message was delivered within
    the timeout would be the worker's fault."""
    first: dict[tuple[str, str], Mapping[str, Any]] = {}
    order: dict[str, list[str]] = {}
    for r in sorted(receipts, key=lambda r: r.get("seq", 0)):
        room, message = r.get("room_id"), r.get("message_id")
        if room is None or message is None or (room, message) in first:
            continue
        first[(room, message)] = r
        order.setdefault(room, []).append(message)
    past = 0
    for room, arrived in order.items():
        places = position.get(room, {})
        known = [m for m in arrived if m in places]
        for later, earlier in itertools.pairwise(known):
            if places[later] > places[earlier]:  # ``earlier`` (in room order) reached the device after ``later``
                receipt = first[(room, earlier)]
                if receipt["delivered_at_ms"] - receipt["accepted_at_ms"] > ack_timeout_ms:
                    past += 1
    return past
