"""The receipt-log checker, against hand-written logs whose verdicts were worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inturn_devtools.receipts import check, load_receipts, produced_order, receipts_url


def receipts(*deliveries: tuple[str | None, str | None]) -> list[dict[str, Any]]:
    """Receipts in device order for (room_id, message_id) pairs."""
    return [
        {"seq": i, "recipient": "r", "room_id": room, "message_id": msg, "duplicate": False}
        for i, (room, msg) in enumerate(deliveries, start=1)
    ]


PRODUCED = {"A": ["a1", "a2", "a3"], "B": ["b1", "b2"]}


def test_a_clean_run_reports_nothing_wrong() -> None:
    log = receipts(("A", "a1"), ("B", "b1"), ("A", "a2"), ("B", "b2"), ("A", "a3"))
    report = check(log, PRODUCED)
    assert (report.produced, report.lost, report.duplicated, report.reordered, report.unexpected) == (5, 0, 0, 0, 0)
    assert report.ok()
    assert report.rooms["A"].clean
    assert report.rooms["B"].clean
    assert report.reordered_rooms == ()
    assert report.summary().startswith("2 rooms, 5 produced: lost 0, duplicated 0, reordered 0 (in 0 rooms)")


def test_a_message_never_received_is_lost_in_its_room() -> None:
    report = check(receipts(("A", "a1"), ("A", "a3"), ("B", "b1"), ("B", "b2")), PRODUCED)
    assert report.lost == 1
    assert report.rooms["A"].lost == ("a2",)
    assert report.rooms["A"].received == 2
    assert report.reordered == 0  # a gap is not an inversion
    assert not report.ok()
    assert report.ok(max_lost=1)


def test_a_message_received_three_times_in_a_row_counts_two_duplicates_in_its_room() -> None:
    log = receipts(("A", "a1"), ("A", "a1"), ("A", "a1"), ("A", "a2"), ("A", "a3"), ("B", "b1"), ("B", "b2"))
    report = check(log, PRODUCED)
    assert report.duplicated == 2
    assert report.rooms["A"].duplicated == 2
    assert report.rooms["B"].duplicated == 0
    assert report.reordered == 0
    assert report.ok(max_duplicates=2)
    assert not report.ok(max_duplicates=1)


def test_a_stale_copy_of_an_older_message_after_a_newer_one_is_reordering_not_a_duplicate() -> None:
    # a1 again after a2: the device shows a1, a2, a1 (the re-send of a worker whose cursor went back)
    log = receipts(("A", "a1"), ("A", "a1"), ("A", "a2"), ("A", "a1"), ("A", "a3"), ("B", "b1"), ("B", "b2"))
    report = check(log, PRODUCED)
    assert report.rooms["A"].duplicated == 1  # the second a1, right after the first
    assert report.rooms["A"].stale == 1  # the third a1, after a2
    assert report.rooms["A"].reordered == 1
    assert (report.duplicated, report.reordered, report.stale, report.lost) == (1, 1, 1, 0)
    assert report.reordered_rooms == ("A",)
    assert not report.ok(max_duplicates=5)  # the stale copy fails the 0-reordered target
    assert report.ok(max_duplicates=1, max_reordered=1)


def test_a_copy_of_the_newest_message_so_far_is_a_duplicate_even_after_older_ones_arrived_late() -> None:
    # a2 first, then a1 (one inversion), then a2 again: a2 is still the newest received, so its copy
    # is a plain duplicate; a1 again after that is stale
    log = receipts(("A", "a2"), ("A", "a1"), ("A", "a2"), ("A", "a1"), ("A", "a3"))
    report = check(log, {"A": ["a1", "a2", "a3"]})
    assert (report.duplicated, report.stale, report.reordered) == (1, 1, 2)


def test_duplicates_are_reported_per_room_with_the_worst_room_named() -> None:
    produced = {"A": ["a1", "a2"], "B": ["b1", "b2"], "C": ["c1"]}
    # A: a1 three times in a row (2 duplicates); B: b2 twice (1); C clean. Total 3, worst room A with 2.
    log = receipts(
        ("A", "a1"), ("B", "b1"), ("A", "a1"), ("B", "b2"), ("B", "b2"), ("A", "a1"), ("A", "a2"), ("C", "c1")
    )
    report = check(log, produced)
    assert report.duplicated == 3
    assert report.worst_room is not None
    assert (report.worst_room.room_id, report.worst_room.duplicated) == ("A", 2)
    assert report.max_duplicated_per_room == 2
    assert report.ok(max_duplicates=3, max_duplicates_per_room=2)
    assert not report.ok(max_duplicates=3, max_duplicates_per_room=1)
    assert report.summary().splitlines()[0] == (
        "3 rooms, 5 produced: lost 0, duplicated 3 (worst room A: 2), reordered 0 (in 0 rooms), unexpected 0"
    )


def test_the_worst_room_of_a_tie_is_the_first_by_room_id_and_none_without_duplicates() -> None:
    produced = {"A": ["a1"], "B": ["b1"]}
    report = check(receipts(("B", "b1"), ("B", "b1"), ("A", "a1"), ("A", "a1")), produced)
    assert report.worst_room is not None
    assert report.worst_room.room_id == "A"
    clean = check(receipts(("A", "a1"), ("B", "b1")), produced)
    assert clean.worst_room is None
    assert clean.max_duplicated_per_room == 0
    assert clean.ok(max_duplicates_per_room=0)


def test_the_summary_counts_stale_re_sends_among_the_reorderings() -> None:
    report = check(receipts(("A", "a1"), ("A", "a2"), ("A", "a1"), ("A", "a3")), {"A": ["a1", "a2", "a3"]})
    lines = report.summary().splitlines()
    assert lines[0] == (
        "1 rooms, 3 produced: lost 0, duplicated 0, reordered 1 (in 1 rooms, 1 stale re-sends), unexpected 0"
    )
    assert lines[1].startswith("  A: produced 3, received 3, lost 0 [], duplicated 0, reordered 1 (1 stale)")


def test_adjacent_inversions_of_first_receptions_are_counted_per_room() -> None:
    # A arrives a2, a1, a3: one adjacent inversion (a2 > a1). B arrives b2, b1: one.
    log = receipts(("A", "a2"), ("B", "b2"), ("A", "a1"), ("A", "a3"), ("B", "b1"))
    report = check(log, PRODUCED)
    assert report.rooms["A"].reordered == 1
    assert report.rooms["B"].reordered == 1
    assert report.reordered == 2
    assert report.reordered_rooms == ("A", "B")
    assert report.lost == 0


def test_a_fully_reversed_room_has_one_inversion_per_adjacent_pair() -> None:
    report = check(receipts(("A", "a3"), ("A", "a2"), ("A", "a1")), {"A": ["a1", "a2", "a3"]})
    assert report.reordered == 2


def test_device_order_follows_seq_not_list_position() -> None:
    log = receipts(("A", "a1"), ("A", "a2"), ("A", "a3"))
    log.reverse()  # same seqs, listed backwards: still in order
    assert check(log, {"A": ["a1", "a2", "a3"]}).reordered == 0


def test_received_but_never_produced_is_unexpected_and_foreign_receipts_are_set_apart() -> None:
    log = receipts(("A", "a1"), ("A", "zz"), ("C", "c1"), (None, None), ("A", "a2"), ("A", "a3"))
    report = check(log, {"A": ["a1", "a2", "a3"]})
    assert report.unexpected == 2
    assert report.rooms["A"].unexpected == ("zz",)
    assert report.rooms["C"].unexpected == ("c1",)
    assert report.rooms["C"].produced == 0
    assert report.unattributed == 1
    assert report.reordered == 0
    assert report.lost == 0
    assert report.ok(max_unexpected=2)


def test_the_summary_names_the_rooms_with_problems() -> None:
    report = check(receipts(("A", "a2"), ("A", "a1")), PRODUCED)
    lines = report.summary().splitlines()
    assert lines[0] == "2 rooms, 5 produced: lost 3, duplicated 0, reordered 1 (in 1 rooms), unexpected 0"
    # both rooms have two problems; ties list by room id
    assert lines[1].startswith("  A: produced 3, received 2, lost 1 ['a3'], duplicated 0, reordered 1")
    assert lines[2].startswith("  B: produced 2, received 0, lost 2 ['b1', 'b2']")


def test_produced_order_groups_pairs_by_room_keeping_their_order() -> None:
    pairs = [("A", "a1"), ("B", "b1"), ("A", "a2")]
    assert produced_order(pairs) == {"A": ["a1", "a2"], "B": ["b1"]}


def test_receipts_load_from_a_json_lines_file(tmp_path: Path) -> None:
    path = tmp_path / "receipts.jsonl"
    log = receipts(("A", "a1"), ("A", "a2"))
    path.write_text("".join(json.dumps(r) + "\n" for r in log) + "\n")
    assert load_receipts(path) == log


def test_a_simulator_base_url_is_turned_into_its_receipts_endpoint() -> None:
    assert receipts_url("http://127.0.0.1:8089") == "http://127.0.0.1:8089/_sim/receipts"
    assert receipts_url("http://h:1/_sim/receipts") == "http://h:1/_sim/receipts"


def test_the_simulators_receipt_log_keeps_the_newest_in_memory_and_everything_in_its_file(tmp_path: Path) -> None:
    from inturn_sim.device import ReceiptLog

    path = tmp_path / "log.jsonl"
    log = ReceiptLog(str(path), keep=4)
    for n in range(1, 7):
        log.record("r", "p", "A", f"m{n}", f"w{n}", n, n)
    log.record("r", "p", "A", "m1", "w7", 7, 7)  # m1 again
    # keep 4 trims to 3 when a 5th comes: [3, 4, 5] after seq 5, [3..6] after 6, [5, 6, 7] after 7
    assert [r["seq"] for r in log.since(0)] == [5, 6, 7]
    assert [r["seq"] for r in log.since(5)] == [6, 7]
    assert log.since(7) == []
    assert log.duplicates == 1
    log.close()
    assert [r["message_id"] for r in load_receipts(path)] == ["m1", "m2", "m3", "m4", "m5", "m6", "m1"]
