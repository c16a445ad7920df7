"""The scenario matrix sizes each scenario's backlog so that no room runs out of messages before the window ends."""

from __future__ import annotations

from benchmarks.bench_matrix import FULL, QUICK, backlog_per_room, high_watermark_for


def test_the_backlog_outlasts_the_window_at_the_raw_loops_rate() -> None:
    # 25,000 rooms at 4,000 msg/s: 5 s + 5 s of warm-up and a 25 s window are 140,000 messages; twice that is
    # 280,000, 11.2 a room (the plan's 50,000 alone would be 2 a room, sent within the warm-up).
    assert backlog_per_room(FULL, 25_000, 4_000.0) == 12
    # 5,000 rooms at 4,000 msg/s: (5 + 1 + 25) s x 4,000 x 2 / 5,000 = 49.6 a room.
    assert backlog_per_room(FULL, 5_000, 4_000.0) == 50


def test_the_plans_backlog_and_two_a_room_stay_lower_bounds() -> None:
    assert backlog_per_room(QUICK, 100, 1.0) == 150  # 15,000 messages over 100 rooms
    assert backlog_per_room(QUICK, 1_000_000, 1.0) == 2


def test_the_high_watermark_holds_two_messages_of_every_room_of_a_partition_and_never_less_than_the_default() -> None:
    # The watermark is per partition (12 in the matrix): 25,000 rooms are 2,084 a partition at most on average.
    assert high_watermark_for(25_000) == 5_000
    assert high_watermark_for(120_000) == 20_000
    assert high_watermark_for(100) == 5_000
