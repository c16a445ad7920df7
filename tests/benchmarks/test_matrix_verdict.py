"""The matrix's verdict tells the inversions ack mode allows (the earlier message still in transit when its ack
timeout ended, by the simulator's own receipt) from the others."""

from __future__ import annotations

from typing import Any

from benchmarks.matrix_figures import verdict
from inturn_devtools.receipts import check


def _receipt(seq: int, message: str, accepted: int, delivered: int) -> dict[str, Any]:
    return {"seq": seq, "room_id": "r", "message_id": message, "accepted_at_ms": accepted, "delivered_at_ms": delivered}


def test_an_inversion_after_a_message_in_transit_past_the_timeout_is_told_from_one_within_it() -> None:
    produced = {"r": ["m0", "m1", "m2", "m3"]}
    receipts = [
        _receipt(1, "m1", 1_600, 1_700),  # sent after m0's 1,500 ms timeout, delivered first
        _receipt(2, "m0", 0, 1_900),  # 1,900 ms between acceptance and the device: past the timeout
        _receipt(3, "m3", 2_000, 2_100),
        _receipt(4, "m2", 1_950, 2_150),  # 200 ms in transit: within the timeout, yet after m3
    ]
    counted = verdict(check(receipts, produced), produced, receipts, 1_500)
    assert counted["reordered"] == 2
    assert counted["reordered_past_timeout"] == 1


def test_without_a_timeout_the_verdict_does_not_tell_them_apart() -> None:
    produced = {"r": ["m0", "m1"]}
    receipts = [_receipt(1, "m1", 10, 20), _receipt(2, "m0", 0, 5_000)]
    counted = verdict(check(receipts, produced), produced, receipts)
    assert counted["reordered"] == 1
    assert "reordered_past_timeout" not in counted
