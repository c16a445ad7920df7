"""Bar charts as inline SVG: the report must open from a file with no network and no JavaScript."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape

#: Series colours (colour-blind safe, Okabe-Ito).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")

_W, _H = 720, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 16, 64


def _ticks(top: float) -> list[float]:
    """Round tick values from 0 to at least ``top`` (about four steps of 1, 2, 2.5 or 5 x 10^k)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [step * i for i in range(math.ceil(top / step) + 1)]


def bar_chart(
    chart_id: str,
    title: str,
    categories: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    stacked: bool = False,
    fmt: Callable[[float], str] = lambda v: f"{v:g}",
) -> str:
    """A grouped (or stacked) bar chart with axis, ticks and legend, as an HTML ``<figure>``.

    Every bar is a ``rect.bar`` carrying ``data-series``, ``data-category`` and ``data-value``,
    so the report can be checked from its DOM.
    """
    names = list(series)
    totals = [
        sum(series[n][i] for n in names) if stacked else max((series[n][i] for n in names), default=0.0)
        for i in range(len(categories))
    ]
    ticks = _ticks(max(totals, default=0.0))
    top = ticks[-1] or 1.0
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    slot = plot_w / max(len(categories), 1)
    bar_w = slot * 0.8 / (1 if stacked else max(len(names), 1))

    def y(value: float) -> float:
        return _TOP + plot_h - plot_h * value / top

    parts = [
        f'<svg class="chart" data-chart="{escape(chart_id)}" role="img" aria-label="{escape(title)}" '
        f'viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for tick in ticks:
        parts.append(
            f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class="grid"/>'
            f'<text x="{_LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" class="tick">{escape(fmt(tick))}</text>'
        )
    for i, category in enumerate(categories):
        x0 = _LEFT + slot * i + slot * 0.1
        base = 0.0
        for j, name in enumerate(names):
            value = float(series[name][i])
            x = x0 if stacked else x0 + bar_w * j
            low, high = (base, base + value) if stacked else (0.0, value)
            parts.append(
                f'<rect class="bar" data-series="{escape(name)}" data-category="{escape(category)}" '
                f'data-value="{value:g}" x="{x:.1f}" y="{y(high):.1f}" width="{max(bar_w - 1, 1):.1f}" '
                f'height="{max(y(low) - y(high), 0):.1f}" fill="{PALETTE[j % len(PALETTE)]}">'
                f"<title>{escape(name)} · {escape(category)}: {escape(fmt(value))}</title></rect>"
            )
            base = high if stacked else base
        label_x = _LEFT + slot * i + slot / 2
        parts.append(
            f'<text x="{label_x:.1f}" y="{_H - _BOTTOM + 16}" text-anchor="middle" class="tick">'
            f"{escape(category)}</text>"
        )
    parts.append(f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(0):.1f}" y2="{y(0):.1f}" class="axis"/>')
    for j, name in enumerate(names):
        lx = _LEFT + 130 * j
        parts.append(
            f'<rect x="{lx}" y="{_H - 24}" width="12" height="12" fill="{PALETTE[j % len(PALETTE)]}"/>'
            f'<text x="{lx + 16}" y="{_H - 14}" class="legend">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return f"<figure><figcaption>{escape(title)}</figcaption>{''.join(parts)}</figure>"
