"""The worker benchmark's count of calls per message: only functions called at least once per two messages count
(start-up and periodic work fall below), Python functions and built-ins apart."""

from __future__ import annotations

from benchmarks.bench_worker import Stats, per_message_calls


def _entry(calls: int) -> tuple[int, int, float, float, dict[object, object]]:
    return (calls, calls, 0.0, 0.0, {})


def test_only_functions_called_once_per_two_messages_count_and_built_ins_count_apart() -> None:
    stats: Stats = {
        ("/srv/room.py", 10, "deliver"): _entry(3000),  # three per message
        ("/srv/acks.py", 20, "route"): _entry(500),  # one per two messages: counts
        ("/srv/app.py", 30, "start"): _entry(1),  # start-up
        ("/srv/checkpoint.py", 40, "once"): _entry(499),  # periodic, just under one per two messages
        ("~", 0, "<method 'get' of 'dict' objects>"): _entry(4000),
        ("~", 0, "<built-in method time.monotonic>"): _entry(12),
    }
    assert per_message_calls(stats, 1000) == {"python": 3.5, "builtin": 4.0}
