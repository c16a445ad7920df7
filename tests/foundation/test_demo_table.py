"""The demo's result table reads whole at 80 columns, the width of a console that is not a terminal."""

from __future__ import annotations

import io

from rich.console import Console

from inturn_devtools.demo import COLUMNS, ModeResult, _print_table
from inturn_devtools.receipts import check


def _result(mode: str, rooms: int, swapped_rooms: int) -> ModeResult:
    produced = {f"room-{i}": [f"{i}#{n}" for n in range(10)] for i in range(rooms)}
    receipts = []
    for i, ids in enumerate(produced.values()):
        order = [ids[1], ids[0], *ids[2:]] if i < swapped_rooms else ids
        receipts += [{"room_id": f"room-{i}", "message_id": m} for m in order]
    return ModeResult(mode=mode, messages=rooms * 10, seconds=31.4, device=check(receipts, produced))


def test_the_demo_table_fits_80_columns_with_every_header_and_figure_whole() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False, color_system=None)
    results = [_result("none", 300, 150), _result("fixed-delay", 300, 69), _result("ack", 300, 0)]
    summary = {
        "none": {"ack_timeouts": "0", "e2e_p99_ms": "1234.5", "out_of_order_rate": "0.0531", "out_of_order_note": ""},
        "fixed-delay": {"ack_timeouts": "0", "e2e_p99_ms": "98765.4", "out_of_order_rate": "",
                        "out_of_order_note": "watermarks cannot order"},
        "ack": {"ack_timeouts": "359", "e2e_p99_ms": "12345.0", "out_of_order_rate": "0.0", "out_of_order_note": ""},
    }  # fmt: skip
    _print_table(console, results, summary)
    text = out.getvalue()
    lines = text.splitlines()
    assert "…" not in text
    assert max(len(line) for line in lines) <= 80
    for column, meaning in COLUMNS[1:]:
        assert f"  {column}: {meaning}" in lines  # each legend line whole, not wrapped
    header = next(line for line in lines if line.lstrip().startswith("mode"))
    assert [c for c, _ in COLUMNS] == [c for c in (h.strip() for h in header.split("  ")) if c]
    rows = {line.split()[0]: line.split() for line in lines if line.split() and line.split()[0] in summary}
    # 150 of 300 rooms had one adjacent pair swapped: 150 of 2,700 pairs.
    # The report's figure beside the log's; "n/m" where the report says its platform cannot order messages.
    assert rows["none"] == ["none", "3000/3000", "150", "(5.6%)", "5.3%", "0", "1234", "ms", "31s"]
    assert rows["fixed-delay"] == ["fixed-delay", "3000/3000", "69", "(2.6%)", "n/m", "0", "98765", "ms", "31s"]
    assert rows["ack"] == ["ack", "3000/3000", "0", "(0.0%)", "0.0%", "359", "12345", "ms", "31s"]
    assert "  not measurable: watermarks cannot order (docs/reports.md)" in lines
