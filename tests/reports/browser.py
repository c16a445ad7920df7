"""The report page as headless Chromium renders it: screenshots, the DOM, and the bars of its SVG charts."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
HAS_CHROMIUM = Path(CHROMIUM).exists()


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a throw-away profile and no network of its own; fails on a non-zero exit."""
    profile = tempfile.mkdtemp(prefix="inturn-chromium-")
    try:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def screenshot_is_a_page(page: Path, out: Path) -> bool:
    """Screenshot ``page`` into ``out``; true when it is a PNG far less compressible than a blank page's."""
    blank, blank_shot = out.with_name("blank.html"), out.with_name("blank.png")
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    chromium(f"--screenshot={out}", "--window-size=1280,2400", page.resolve().as_uri())
    chromium(f"--screenshot={blank_shot}", "--window-size=1280,2400", blank.as_uri())
    # A page of tables and charts compresses far worse than an empty one of the same size.
    return out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5 * blank_shot.stat().st_size


def rendered_dom(page: Path) -> str:
    """The page's DOM after Chromium rendered it."""
    return chromium("--dump-dom", page.resolve().as_uri()).stdout


def rendered_page(page: Path, screenshot: Path) -> str:
    """``rendered_dom`` of ``page``, once its screenshot (into ``screenshot``) showed a page."""
    assert screenshot_is_a_page(page, screenshot), f"{page} renders as a blank page"
    return rendered_dom(page)


def bars(rendered: str, chart: str) -> list[dict[str, Any]]:
    """Every bar of the chart ``chart`` in a rendered DOM: series, category and value."""
    svg = re.search(rf'<svg[^>]*data-chart="{chart}".*?</svg>', rendered, re.S)
    assert svg is not None, f"chart {chart!r} missing from the rendered DOM"
    return [
        {"series": s, "category": c, "value": float(v)}
        for s, c, v in re.findall(r'<rect class="bar" data-series="([^"]*)" data-category="([^"]*)" '
                                  r'data-value="([^"]*)"', svg.group(0))
    ]  # fmt: skip


def table_rows(rendered: str, table_id: str) -> list[list[str]]:
    """The body cells of the table ``table_id`` in a rendered DOM, as text."""
    table = re.search(rf'<table id="{table_id}">.*?<tbody>(.*?)</tbody>', rendered, re.S)
    assert table is not None, f"table {table_id!r} missing from the rendered DOM"
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)]
