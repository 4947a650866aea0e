"""A small SVG line chart: axes with round ticks, one polyline per series, a legend, and
optional vertical markers (events). Pure text, no dependencies, so a report stays one
self-contained file.

Contract: `line_chart(Chart(...))` returns one `<svg class="chart">` element. Points with a
value that is not finite (or not positive, on a logarithmic y axis) are left out: the line
breaks there. A chart without any point says "no data" instead of drawing empty axes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

# Tableau 10: distinguishable, and readable on white.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
DEFAULT_WIDTH = 760
DEFAULT_HEIGHT = 260
_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_TOP, _MARGIN_BOTTOM = 64, 18, 30, 40
_LEGEND_ROW_PX = 18
_LEGEND_TOP_PX = 12  # below the x axis label
_CHAR_PX = 7.0  # rough width of a legend character at 12px
TIME_X_LABEL = "seconds since start"  # the x axis of plots over time


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Marker:
    """A vertical line at `x` (e.g. an agent lost), labelled on hover."""

    x: float
    label: str


@dataclass(frozen=True)
class Chart:
    title: str
    y_label: str
    series: tuple[Series, ...]
    x_label: str = TIME_X_LABEL
    markers: tuple[Marker, ...] = ()
    width: int = DEFAULT_WIDTH
    height: int = DEFAULT_HEIGHT
    y_format: Callable[[float], str] | None = None
    log_y: bool = False  # for latency: p50 and max differ by orders of magnitude


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 times a power of ten) covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0, 1.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value < high + step * 0.999:
        ticks.append(round(value, 12))
        value += step
    return ticks


def log_ticks(low: float, high: float) -> list[float]:
    """Decades covering [low, high] (both > 0), with 2 and 5 between when there are few."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    last = max(last, first + 1)
    steps = (1, 2, 5) if last - first <= 3 else (1,)
    ticks = [m * 10.0**e for e in range(first, last) for m in steps]
    ticks.append(10.0**last)
    while len(ticks) > 2 and ticks[-2] >= high:
        ticks.pop()
    while len(ticks) > 2 and ticks[1] <= low:
        ticks.pop(0)
    return [float(f"{t:.12g}") for t in ticks]


def format_number(value: float) -> str:
    """Compact tick labels: 0.25, 3, 12.5k, 1.2M."""
    magnitude = abs(value)
    if magnitude >= 1e6:
        return f"{value / 1e6:g}M"
    if magnitude >= 1e4:
        return f"{value / 1e3:g}k"
    if magnitude >= 1 or value == 0:
        return f"{value:g}"
    return f"{value:.3g}"


def line_chart(chart: Chart) -> str:
    points = [(x, y) for s in chart.series for x, y in s.points if _drawable(x, y, chart.log_y)]
    legend_rows = _legend_layout(chart.series, chart.width)
    height = chart.height + _LEGEND_TOP_PX + _LEGEND_ROW_PX * (max(r for r, _ in legend_rows) + 1 if legend_rows else 0)
    head = (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{chart.width}" '
        f'height="{height}" viewBox="0 0 {chart.width} {height}" role="img" '
        f'aria-label="{escape(chart.title)}" font-family="sans-serif" font-size="12">'
        f"<title>{escape(chart.title)}</title>"
        f'<text x="{_MARGIN_LEFT}" y="18" font-size="14" font-weight="bold">{escape(chart.title)}</text>'
    )
    if not points:
        return (
            head + f'<text class="no-data" x="{chart.width / 2}" y="{chart.height / 2}" '
            f'text-anchor="middle" fill="#888">no data</text></svg>'
        )
    frame = _Frame(chart, points)
    parts = [
        head,
        frame.axes(chart),
        *(_polyline(s, i, frame) for i, s in enumerate(chart.series)),
        *(_marker(m, frame) for m in chart.markers if frame.x_lo <= m.x <= frame.x_hi),
        *_legend(chart.series, legend_rows, chart.height),
        "</svg>",
    ]
    return "".join(parts)


def _drawable(x: float, y: float, log_y: bool) -> bool:
    return math.isfinite(x) and math.isfinite(y) and (y > 0 or not log_y)


class _Frame:
    """Maps data coordinates to pixels inside the plot area."""

    def __init__(self, chart: Chart, points: list[tuple[float, float]]):
        xs, ys = [x for x, _ in points], [y for _, y in points]
        self.x_ticks = nice_ticks(min(xs), max(xs))
        self.log_y = chart.log_y
        self.y_ticks = log_ticks(min(ys), max(ys)) if chart.log_y else nice_ticks(min(0.0, min(ys)), max(ys))
        self.x_lo, self.x_hi = self.x_ticks[0], self.x_ticks[-1]
        self.y_lo, self.y_hi = self.y_ticks[0], self.y_ticks[-1]
        self.left, self.right = _MARGIN_LEFT, chart.width - _MARGIN_RIGHT
        self.top, self.bottom = _MARGIN_TOP, chart.height - _MARGIN_BOTTOM

    def px(self, x: float) -> float:
        return self.left + (x - self.x_lo) / ((self.x_hi - self.x_lo) or 1) * (self.right - self.left)

    def py(self, y: float) -> float:
        if self.log_y:
            share = math.log10(y / self.y_lo) / (math.log10(self.y_hi / self.y_lo) or 1)
        else:
            share = (y - self.y_lo) / ((self.y_hi - self.y_lo) or 1)
        return self.bottom - share * (self.bottom - self.top)

    def axes(self, chart: Chart) -> str:
        y_format = chart.y_format or format_number
        out = []
        for y in self.y_ticks:
            py = self.py(y)
            out.append(
                f'<line x1="{self.left}" y1="{py:.1f}" x2="{self.right}" y2="{py:.1f}" stroke="#e5e5e5"/>'
                f'<text x="{self.left - 6}" y="{py + 4:.1f}" text-anchor="end" fill="#444">'
                f"{escape(y_format(y))}</text>"
            )
        for x in self.x_ticks:
            px = self.px(x)
            out.append(
                f'<line x1="{px:.1f}" y1="{self.bottom}" x2="{px:.1f}" y2="{self.bottom + 4}" stroke="#444"/>'
                f'<text x="{px:.1f}" y="{self.bottom + 17}" text-anchor="middle" fill="#444">'
                f"{escape(format_number(x))}</text>"
            )
        out.append(
            f'<path d="M{self.left},{self.top}V{self.bottom}H{self.right}" fill="none" stroke="#444"/>'
            f'<text x="{(self.left + self.right) / 2}" y="{self.bottom + 33}" text-anchor="middle" '
            f'fill="#444">{escape(chart.x_label)}</text>'
            f'<text transform="translate(14,{(self.top + self.bottom) / 2}) rotate(-90)" '
            f'text-anchor="middle" fill="#444">{escape(chart.y_label)}</text>'
        )
        return "".join(out)


def _polyline(series: Series, index: int, frame: _Frame) -> str:
    """One polyline per run of finite points; a lone point becomes a dot."""
    color = PALETTE[index % len(PALETTE)]
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in series.points:
        if _drawable(x, y, frame.log_y):
            runs[-1].append((frame.px(x), frame.py(y)))
        elif runs[-1]:
            runs.append([])
    out = [f'<g class="series" data-name="{escape(series.name)}"><title>{escape(series.name)}</title>']
    for run in (r for r in runs if r):
        if len(run) == 1:
            out.append(f'<circle cx="{run[0][0]:.1f}" cy="{run[0][1]:.1f}" r="2.5" fill="{color}"/>')
        else:
            coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in run)
            out.append(
                f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="1.6" stroke-linejoin="round"/>'
            )
    out.append("</g>")
    return "".join(out)


def _marker(marker: Marker, frame: _Frame) -> str:
    px = frame.px(marker.x)
    return (
        f'<g class="marker"><title>{escape(marker.label)}</title>'
        f'<line x1="{px:.1f}" y1="{frame.top}" x2="{px:.1f}" y2="{frame.bottom}" stroke="#c00" '
        f'stroke-dasharray="4 3"/></g>'
    )


def _legend_layout(series: Sequence[Series], width: int) -> list[tuple[int, float]]:
    """(row, x) of each legend entry, wrapping at the chart's width."""
    layout, row, x = [], 0, float(_MARGIN_LEFT)
    for s in series:
        entry_px = 22 + _CHAR_PX * len(s.name) + 14
        if x + entry_px > width and x > _MARGIN_LEFT:
            row, x = row + 1, float(_MARGIN_LEFT)
        layout.append((row, x))
        x += entry_px
    return layout


def _legend(series: Sequence[Series], layout: list[tuple[int, float]], chart_height: int) -> list[str]:
    out = []
    for index, (s, (row, x)) in enumerate(zip(series, layout)):
        y = chart_height + _LEGEND_TOP_PX + row * _LEGEND_ROW_PX
        color = PALETTE[index % len(PALETTE)]
        out.append(
            f'<g class="legend"><rect x="{x:.1f}" y="{y - 9}" width="16" height="4" fill="{color}"/>'
            f'<text x="{x + 22:.1f}" y="{y:.1f}" fill="#222">{escape(s.name)}</text></g>'
        )
    return out
