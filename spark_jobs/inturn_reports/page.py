"""The HTML report a person opens in a browser: one self-contained file, charts as inline SVG."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from inturn_reports.charts import bar_chart
from inturn_reports.transform import LATENCY_EDGES_MS

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Trends:
    """The last nights, as the trend section shows them: ``platforms`` rows and the worst rooms over them."""

    first: dt.date
    last: dt.date
    nightly: Sequence[Record]
    worst_rooms: Sequence[Record]


_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px; color: #222; max-width: 1200px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; }
table { border-collapse: collapse; margin: 8px 0; max-width: 100%; font-size: 12px; }
th, td { padding: 3px 4px; border-bottom: 1px solid #ddd; }
#summary th, #summary td { padding: 2px 3px; font-size: 11px; } #summary th { overflow-wrap: anywhere; }
th { text-align: left; background: #f4f4f4; vertical-align: bottom; }
td.n { text-align: right; font-variant-numeric: tabular-nums; } td.na { color: #777; font-style: italic; }
svg { max-width: 100%; height: auto; } .notes { color: #555; font-size: 13px; }
figure { margin: 12px 0; } figcaption { font-weight: 600; margin-bottom: 4px; }
svg .grid { stroke: #e5e5e5; } svg .axis { stroke: #444; } svg text { font-size: 11px; fill: #333; }
.meta { color: #666; }
"""

_SUMMARY_COLUMNS = [
    ("date", "date"),
    ("platform", "platform"),
    ("mode", "mode"),
    ("messages", "messages"),
    ("delivered_rate", "delivered"),
    ("ack_rate", "acked"),
    ("timeout_rate", "timeouts"),
    ("late_acks", "late acks"),
    ("retries", "retries"),
    ("dead_letters", "dead letters"),
    ("duplicates", "duplicates"),
    ("no_device_ts", "no device ts"),
    ("ack_p50_ms", "ack p50 ms"),
    ("ack_p95_ms", "ack p95 ms"),
    ("e2e_p50_ms", "e2e p50 ms"),
    ("e2e_p95_ms", "e2e p95 ms"),
    ("e2e_p99_ms", "e2e p99 ms"),
    ("device_p50_ms", "device p50 ms"),
    ("device_p95_ms", "device p95 ms"),
    ("out_of_order_rate", "out of order"),
    ("dispatch_violations", "dispatch violations"),
]
_RATES = {"delivered_rate", "ack_rate", "timeout_rate", "out_of_order_rate"}
#: The figures a platform may be unable to report, and the column of the reason (``transform.measurable``).
_NOTES = {
    "out_of_order_rate": "out_of_order_note",
    "delivered_rate": "delivered_note",
    "device_p50_ms": "device_latency_note",
    "device_p95_ms": "device_latency_note",
}
NOT_MEASURABLE = "not measurable"


def _fmt(name: str, value: Any) -> str:
    if value is None:
        return "-"
    if name in _RATES:
        return f"{100 * float(value):.2f}%"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _cell(row: Record, name: str) -> str:
    """One cell: the value, or "not measurable" with the reason (a tooltip) where the platform cannot report it."""
    note = row.get(_NOTES.get(name, ""))
    if note is not None:
        return f'<td class="na" title="{escape(str(note))}">{NOT_MEASURABLE}</td>'
    value = row[name]
    return f'<td class="{"n" if isinstance(value, int | float) else ""}">{escape(_fmt(name, value))}</td>'


def _notes(summary: Sequence[Record]) -> str:
    """Under the summary: each platform's figures that are not measurable, and why."""
    reasons = sorted({(str(r["platform"]), label, str(r[column])) for r in summary
                      for label, column in (("out of order", "out_of_order_note"), ("delivered", "delivered_note"),
                                            ("device latency", "device_latency_note"))
                      if r.get(column) is not None})  # fmt: skip
    if not reasons:
        return ""
    items = "".join(f"<li>{escape(p)}, {escape(label)}: {NOT_MEASURABLE}: {escape(why)}.</li>"
                    for p, label, why in reasons)  # fmt: skip
    return f'<ul class="notes" id="not-measurable">{items}</ul>'


def _table(rows: Sequence[Record], columns: Sequence[tuple[str, str]], css_id: str) -> str:
    head = "".join(f"<th>{escape(label)}</th>" for _, label in columns)
    body = []
    for row in rows:
        cells = "".join(_cell(row, k) for k, _ in columns)
        body.append(f"<tr>{cells}</tr>")
    return f'<table id="{css_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _latency_chart(histogram: Sequence[Record]) -> str:
    labels = [f"{e / 1000:g}s" if e >= 1000 else f"{e}ms" for e in LATENCY_EDGES_MS] + [
        f">{LATENCY_EDGES_MS[-1] / 1000:g}s"
    ]
    edges: list[int | None] = [*LATENCY_EDGES_MS, None]
    counts: dict[str, dict[int | None, int]] = defaultdict(lambda: defaultdict(int))
    for row in histogram:
        if row["measure"] == "e2e":
            counts[row["mode"]][row["upper_ms"]] += int(row["messages"])
    series = {}
    for mode in sorted(counts):
        total = sum(counts[mode].values()) or 1
        series[mode] = [100 * counts[mode][e] / total for e in edges]
    return bar_chart(
        "latency",
        "End-to-end latency (created → first ack): share of messages per bucket (upper edge), by mode",
        labels,
        series,
        fmt=lambda v: f"{v:.0f}%",
    )


def _ordering_chart(summary: Sequence[Record]) -> str:
    pairs: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in summary:
        if row["pairs"] is None:  # a platform that cannot order its messages: not drawn as 0
            continue
        cell = pairs[(row["platform"], row["mode"])]
        cell[0] += int(row["inverted"])
        cell[1] += int(row["pairs"])
    platforms = sorted({p for p, _ in pairs})
    modes = sorted({m for _, m in pairs})
    series = {
        mode: [100 * pairs[(p, mode)][0] / pairs[(p, mode)][1] if pairs[(p, mode)][1] else 0.0 for p in platforms]
        for mode in modes
    }
    return bar_chart(
        "ordering",
        "Out-of-order rate at the device (% of consecutive pairs inverted), by platform and mode "
        "(the platforms that can order their messages)",
        platforms,
        series,
        fmt=lambda v: f"{v:.1f}%",
    )


def _timeline_chart(timeline: Sequence[Record]) -> str:
    kinds = [("acked", "acked"), ("sent_unacked", "sent (no ack wait)"), ("ack_timeouts", "ack timeout"),
             ("dead_letters", "dead letter")]  # fmt: skip
    buckets: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in timeline:
        for key, _ in kinds:
            buckets[row["bucket_start_ms"]][key] += int(row[key])
    starts = sorted(buckets)
    labels = [dt.datetime.fromtimestamp(s / 1000, dt.UTC).strftime("%m-%d %H:%M") for s in starts]
    series = {label: [float(buckets[s][key]) for s in starts] for key, label in kinds}
    return bar_chart("outcomes", "Outcomes over time (messages by first event), all modes", labels, series,
                     stacked=True)  # fmt: skip


def _in_turn_check(summary: Sequence[Record]) -> str:
    ack_rows = [r for r in summary if r["mode"] == "ack"]
    violations = sum(int(r["dispatch_violations"]) for r in ack_rows)
    pairs = sum(int(r["dispatch_pairs"]) for r in ack_rows)
    verdict = "as it must be" if violations == 0 else "<strong>the in-turn invariant was broken</strong>"
    return f"Dispatch-order violations in ack mode: {violations:,} of {pairs:,} consecutive dispatches ({verdict})."


#: The trend charts: (chart id, title, column of the ``platforms`` rows, scale to the plotted unit, format).
_TREND_CHARTS: list[tuple[str, str, str, float, Callable[[float], str]]] = [
    ("trend-out-of-order", "Out-of-order rate at the device (% of pairs inverted), per night and platform",
     "out_of_order_rate", 100.0, lambda v: f"{v:.1f}%"),
    ("trend-ack-timeouts", "Ack timeouts per night and platform", "ack_timeouts", 1.0, lambda v: f"{v:,.0f}"),
    ("trend-delivered", "Delivery rate (% of messages delivered or read), per night and platform",
     "delivered_rate", 100.0, lambda v: f"{v:.1f}%"),
    ("trend-e2e-p99", "End-to-end latency p99 (ms), per night and platform", "e2e_p99_ms", 1.0,
     lambda v: f"{v:,.0f}"),
]  # fmt: skip


def _trend_section(trends: Trends) -> str:
    nights = sorted({row["date"] for row in trends.nightly})
    platforms = sorted({row["platform"] for row in trends.nightly})
    by_key = {(row["date"], row["platform"]): row for row in trends.nightly}
    labels = [night.isoformat() for night in nights]
    charts = []
    for chart_id, title, column, scale, fmt in _TREND_CHARTS:
        # A platform that cannot report the figure (null every night) is left out, not drawn as 0.
        shown = [p for p in platforms if any(r[column] is not None for r in trends.nightly if r["platform"] == p)]
        series = {
            platform: [
                scale * float(value)
                if (row := by_key.get((night, platform))) is not None and (value := row[column]) is not None
                else 0.0
                for night in nights
            ]
            for platform in shown
        }
        charts.append(bar_chart(chart_id, title, labels, series, fmt=fmt))
    worst_cols = [("measure", "measure"), ("rank", "#"), ("room_id", "room"), ("platform", "platform"),
                  ("mode", "mode"), ("nights", "nights"), ("messages", "messages"), ("value", "value")]  # fmt: skip
    span = f"{trends.first.isoformat()} to {trends.last.isoformat()}"
    return (
        f'<h2>Trends: the nights {escape(span)}</h2>\n<p class="meta">{len(nights)} of them reported.</p>\n'
        + "\n".join(charts)
        + f"\n<h3>Worst rooms over these nights</h3>\n{_table(trends.worst_rooms, worst_cols, 'worst-rooms-nights')}"
    )


def render(
    summary: Sequence[Record],
    worst: Sequence[Record],
    timeline: Sequence[Record],
    histogram: Sequence[Record],
    trends: Trends,
    meta: Mapping[str, str],
) -> str:
    """The whole report page: headline table, three charts, worst rooms, then the trends over the last
    nights (four charts and their worst rooms). Needs no network to display."""
    info = " · ".join(f"{escape(k)}: {escape(v)}" for k, v in meta.items())
    worst_cols = [("date", "date"), ("measure", "measure"), ("rank", "#"), ("room_id", "room"),
                  ("platform", "platform"), ("mode", "mode"), ("value", "value")]  # fmt: skip
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>inturn delivery and ordering report</title>
<style>{_STYLE}</style></head>
<body>
<h1>inturn delivery and ordering report</h1>
<p class="meta">{info}</p>
<p id="in-turn-check">{_in_turn_check(summary)}</p>
<h2>Summary per day, platform and ordering mode</h2>
{_table(summary, _SUMMARY_COLUMNS, "summary")}
{_notes(summary)}
<h2>Latency</h2>
{_latency_chart(histogram)}
<h2>Ordering</h2>
{_ordering_chart(summary)}
<h2>Outcomes over time</h2>
{_timeline_chart(timeline)}
<h2>Worst rooms</h2>
{_table(worst, worst_cols, "worst-rooms")}
{_trend_section(trends)}
</body></html>
"""
