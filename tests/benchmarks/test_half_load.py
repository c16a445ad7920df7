"""The worker's turn-to-send delay, read from its own events of either shape (a ``dispatched`` event followed by
a terminal one, or one terminal event per message carrying the send time), and how the half-load scenario and
ack mode's rate against the raw loop read on the benchmark page."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.matrix_figures import turn_delays
from benchmarks.worker_figures import half_load_section, worker_reading


def _event(kind: str, offset: int, ts: int, **times: int) -> dict[str, Any]:
    return {"type": kind, "room_id": "r1", "partition": 0, "offset": offset, "ts_ms": ts, **times}


# Room r1: offset 0 consumed at 900, sent at 1000, acked at 1200; offset 1 consumed at 950, sent at 1250 (its
# turn came at 1200, the ack of offset 0), acked at 1500; offset 2 dead-lettered at 1600 without a send;
# offset 3 consumed at 960, sent at 1700 (its turn came at 1600), acked at 1900.
TWO_EVENTS = [
    _event("dispatched", 0, 1000, sent_at_ms=1000, consumed_at_ms=900),
    _event("acked", 0, 1200, sent_at_ms=1000),
    _event("dispatched", 1, 1250, sent_at_ms=1250, consumed_at_ms=950),
    _event("acked", 1, 1500, sent_at_ms=1250),
    _event("dead_lettered", 2, 1600),
    _event("dispatched", 3, 1700, sent_at_ms=1700, consumed_at_ms=960),
    _event("acked", 3, 1900, sent_at_ms=1700),
]
ONE_EVENT = [
    _event("acked", 0, 1200, sent_at_ms=1000, consumed_at_ms=900),
    _event("acked", 1, 1500, sent_at_ms=1250, consumed_at_ms=950),
    _event("dead_lettered", 2, 1600),
    _event("acked", 3, 1900, sent_at_ms=1700, consumed_at_ms=960),
]


@pytest.mark.parametrize("events", [TWO_EVENTS, ONE_EVENT, list(reversed(ONE_EVENT))])
def test_a_turn_starts_at_the_later_of_consumption_and_the_previous_message_s_terminal_event(
    events: list[dict[str, Any]],
) -> None:
    consumed_to_sent, turn_to_sent = turn_delays(events, 0, 10_000)
    assert sorted(turn_to_sent) == [50, 100, 100]  # 1250 - 1200, 1000 - 900, 1700 - 1600
    assert sorted(consumed_to_sent) == [100, 300, 740]


def test_only_messages_sent_in_the_window_count() -> None:
    _, turn_to_sent = turn_delays(ONE_EVENT, 1100, 1800)
    assert sorted(turn_to_sent) == [50, 100]


HALF_LOAD = {
    "rooms": 5000,
    "raw": {"msgs_per_s": 1800.0},
    "rate_offered_msgs_per_s": 900.0,
    "delivered_msgs_per_s": 897.5,
    "window_s": 30.0,
    "worker_cpu_s_per_s": 0.41,
    "turn_to_sent_ms": {"p50": 2.0, "p99": 61.0, "n": 26000},
    "consumed_to_sent_ms": {"p50": 3.0, "p99": 90.0, "n": 26000},
    "receipts": {"lost": 0, "reordered": 0, "duplicated": 1},
    "share_of_raw_rate": 0.5,
    "target_turn_to_sent_p99_ms": 50,
}


def test_the_half_load_section_and_reading_carry_the_delay_and_its_verdict() -> None:
    page = "\n".join(half_load_section(HALF_LOAD))
    assert "| 900 | 897.5 | 2 / 61 (n = 26,000) | 3 / 90 | 0.41 | 0 | 0 | 1 |" in page
    assert "reached 1,800 msg/s" in page
    reading = worker_reading({"results": {"half_load": HALF_LOAD}})
    assert reading == [
        "At half the raw loop's rate (5,000 rooms), the worker's turn→sent delay p99: 61 ms, target ≤ 50 ms: not met."
    ]


def test_ack_mode_against_the_raw_loop_is_judged_at_5000_and_25000_rooms() -> None:
    scenarios = [
        {"rooms": 1000, "ack_over_raw": 0.9},
        {"rooms": 5000, "ack_over_raw": 0.55},
        {"rooms": 5000, "ack_over_raw": 0.38},
        {"rooms": 25_000, "ack_over_raw": 0.61},
        {"rooms": 25_000, "error": "TimeoutError()"},
    ]
    reading = worker_reading({"results": {"matrix": {"scenarios": scenarios}}})
    assert reading == [
        "Ack mode against the raw loop at 5,000 rooms: 0.55, 0.38, target ≥ 0.5: not met.",
        "Ack mode against the raw loop at 25,000 rooms: 0.61, target ≥ 0.5: met.",
    ]


def test_a_half_load_offered_at_half_the_sustained_rate_names_that_rate_and_the_raw_burst() -> None:
    measured = {
        **HALF_LOAD,
        "capacity": {"msgs_per_s": 1500.0},
        "share_of_capacity": 0.5,
        "rate_offered_msgs_per_s": 750.0,
    }
    del measured["share_of_raw_rate"]
    page = "\n".join(half_load_section(measured))
    assert "under a standing backlog sustained 1,500 msg/s on this box (the raw HTTP loop's burst reached 1,800" in page
    assert "offered 750 msg/s (0.5 of the sustained rate)" in page
    reading = worker_reading({"results": {"half_load": measured}})
    assert reading[0].startswith("At half the rate the pipeline sustains (5,000 rooms)")
