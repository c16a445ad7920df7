"""The page as a person sees it (no Spark): figures a platform cannot report, worst rooms, and its width."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from inturn_reports import page
from inturn_reports.transform import SCHEMAS, worst_rooms
from inturn_reports.transform.small import only_what_it_can_see
from tests.reports.browser import HAS_CHROMIUM, chromium, table_rows

DAY = dt.date(2026, 9, 23)


def _summary_row(platform: str, mode: str) -> dict[str, Any]:
    """A summary row with every column filled with wide values (the widest the page must fit)."""
    row: dict[str, Any] = {}
    for field in SCHEMAS["summary"]:
        if pa.types.is_floating(field.type):
            row[field.name] = 0.123456 if field.name.endswith("_rate") else 123_456.7
        elif pa.types.is_integer(field.type):
            row[field.name] = 12_345_678
    row.update(date=DAY, platform=platform, mode=mode, dispatch_violations=0)
    return only_what_it_can_see(row)


def _page(summary: list[dict[str, Any]], worst: list[dict[str, Any]] | None = None) -> str:
    trends = page.Trends(first=DAY, last=DAY, nightly=[], worst_rooms=[])
    meta = {"range": "2026-09-23 → 2026-09-24", "source": "files"}
    return page.render(summary, worst or [], [], [], trends, meta)


ROWS = [_summary_row(p, m) for p in ("whatsapp", "messenger", "instagram") for m in ("fixed-delay", "partition")]


def test_a_platform_that_cannot_order_its_messages_has_no_rate_but_the_reason() -> None:
    by_platform = {r["platform"]: r for r in ROWS}
    assert by_platform["whatsapp"]["out_of_order_rate"] == 0.123456
    assert by_platform["whatsapp"]["out_of_order_note"] is None
    for platform in ("messenger", "instagram"):
        row = by_platform[platform]
        assert (row["pairs"], row["inverted"], row["out_of_order_rate"]) == (None, None, None)
        assert row["out_of_order_note"]
    assert "watermark" in by_platform["messenger"]["out_of_order_note"]
    # Messenger's watermark says delivered; a synchronous answer says nothing of delivery.
    assert by_platform["messenger"]["delivered_rate"] is not None
    assert by_platform["instagram"]["delivered_rate"] is None
    assert by_platform["instagram"]["delivered_note"]


def test_the_page_says_not_measurable_with_the_reason_never_0(tmp_path: Path) -> None:
    html = _page(ROWS)
    rows = table_rows(html, "summary")
    out_of_order = [h for h, _ in page._SUMMARY_COLUMNS].index("out_of_order_rate")
    assert {r[1]: r[out_of_order] for r in rows} == {
        "whatsapp": "12.35%", "messenger": page.NOT_MEASURABLE, "instagram": page.NOT_MEASURABLE,
    }  # fmt: skip
    notes = re.search(r'<ul class="notes" id="not-measurable">(.*?)</ul>', html, re.S)
    assert notes is not None
    assert "messenger, out of order: not measurable: delivery watermarks" in notes.group(1)
    assert "instagram, delivered: not measurable" in notes.group(1)
    # The ordering chart draws only the platform that can order its messages.
    ordering = re.findall(r'data-chart="ordering".*?</svg>', html, re.S)[0]
    assert 'data-category="whatsapp"' in ordering
    assert 'data-category="messenger"' not in ordering
    assert 'data-category="instagram"' not in ordering


def test_worst_rooms_never_list_a_room_whose_measure_is_0() -> None:
    rooms = pa.Table.from_pylist(
        [
            {"date": DAY, "room_id": "hot", "platform": "whatsapp", "mode": "none", "messages": 9, "ack_timeouts": 2,
             "late_acks": 0, "dead_letters": 0, "pairs": 8, "inverted": 4, "dispatch_violations": 0,
             "e2e_p95_ms": 900.0, "out_of_order_rate": 0.5},
            {"date": DAY, "room_id": "calm", "platform": "whatsapp", "mode": "none", "messages": 9, "ack_timeouts": 0,
             "late_acks": 0, "dead_letters": 0, "pairs": 8, "inverted": 0, "dispatch_violations": 0,
             "e2e_p95_ms": 0.0, "out_of_order_rate": 0.0},
            {"date": DAY, "room_id": "blind", "platform": "messenger", "mode": "none", "messages": 9,
             "ack_timeouts": 0, "late_acks": 0, "dead_letters": 0, "pairs": None, "inverted": None,
             "dispatch_violations": 0, "e2e_p95_ms": None, "out_of_order_rate": None},
        ],
        schema=SCHEMAS["rooms"],
    )  # fmt: skip
    listed = {(r["measure"], r["room_id"]) for r in worst_rooms(rooms, 10).to_pylist()}
    assert listed == {("out_of_order_rate", "hot"), ("ack_timeouts", "hot"), ("e2e_p95_ms", "hot")}


@pytest.mark.skipif(not HAS_CHROMIUM, reason="needs the Chromium that make setup installs")
def test_the_page_fits_1280_px_without_horizontal_scrolling(tmp_path: Path) -> None:
    # The widest summary the report writes (every figure seven digits or more), in a 1280-px window: the page's
    # width as Chromium lays it out is written into the DOM by a script appended for the test.
    probe = "<script>document.body.dataset.width = document.documentElement.scrollWidth;</script></body>"
    html = _page(ROWS * 3).replace("</body>", probe)
    path = tmp_path / "report.html"
    path.write_text(html, encoding="utf-8")
    dom = chromium("--window-size=1280,2400", "--dump-dom", path.as_uri()).stdout
    width = re.search(r'<body data-width="(\d+)"', dom)
    assert width is not None, dom[:300]
    assert int(width.group(1)) <= 1280
