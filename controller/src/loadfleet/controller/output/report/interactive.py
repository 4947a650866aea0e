"""Interactive charts: each chart of a report is a `<figure>` holding its static SVG (what a
browser without scripts shows, and what prints) and its data as JSON; `charts.js` draws it
again with uPlot, the chart library embedded inline, with values on hover, zoom into a range
and series toggles, and hides the SVG. A report stays one file that opens offline.

uPlot comes from the npm registry (`make report-assets`, pinned by
controller/report-js/package-lock.json) into `vendor/`, which the controller's wheel carries.
Without it (a source tree where `make report-assets` never ran) reports keep the static SVG
charts and say how to get the interactive ones.

Contract: `figure(chart)` is one `<figure class="chart-box">`; `hint()` goes once above the
charts, `scripts()` once at the end of the page (empty without the library). Series keep their order and names; every
series is drawn against one x axis (the union of the series' x values, `null` where a series
has no point, as uPlot wants), and a value that is not finite (or not positive, on a
logarithmic axis) is `null`: a gap, as in the SVG.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any

from loadfleet.controller.output.report.svg import PALETTE, TIME_X_LABEL, Chart, line_chart

VENDOR = "vendor"
LIBRARY_FILES = ("uPlot.iife.min.js", "uPlot.min.css", "LICENSE")
GLUE = "charts.js"
# Charts whose x axis is time since the start share one cursor (hovering one shows the same
# moment on every chart); others (offered load) are on their own.
TIME_SYNC_KEY = "time"
# Enough for the values a report shows (its tables have the exact figures).
SIGNIFICANT_DIGITS = 6
HINT = "drag to zoom in, double-click to zoom out, click a name to hide or show its line"


@dataclass(frozen=True)
class ChartLibrary:
    script: str
    css: str
    license: str
    glue: str


@functools.cache
def chart_library() -> ChartLibrary | None:
    """uPlot and the report's own script, or None when `make report-assets` never ran."""
    package = resources.files(__package__)
    try:
        script, css, license_text = ((package / VENDOR / name).read_text(encoding="utf-8") for name in LIBRARY_FILES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return ChartLibrary(script=script, css=css, license=license_text, glue=(package / GLUE).read_text(encoding="utf-8"))


def chart_data(chart: Chart) -> dict[str, Any]:
    """What charts.js draws: uPlot's columns (x first) and how to draw them."""
    xs = sorted({x for s in chart.series for x, y in s.points if math.isfinite(x)})
    column = {x: i for i, x in enumerate(xs)}
    data: list[list[float | None]] = [[_rounded(x) for x in xs]]
    for series in chart.series:
        ys: list[float | None] = [None] * len(xs)
        for x, y in series.points:
            if math.isfinite(x) and math.isfinite(y) and (y > 0 or not chart.log_y):
                ys[column[x]] = _rounded(y)
        data.append(ys)
    return {
        "title": chart.title,
        "x_label": chart.x_label,
        "y_label": chart.y_label,
        "log_y": chart.log_y,
        "sync": TIME_SYNC_KEY if chart.x_label == TIME_X_LABEL else "",
        "series": [{"name": s.name, "color": PALETTE[i % len(PALETTE)]} for i, s in enumerate(chart.series)],
        "markers": [{"x": m.x, "label": m.label} for m in chart.markers if math.isfinite(m.x)],
        "data": data,
        "width": chart.width,
        "height": chart.height,
    }


def _rounded(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def figure(chart: Chart) -> str:
    """The chart's SVG and, when the library is there, its data for charts.js."""
    svg = line_chart(chart)
    if chart_library() is None:
        return f'<figure class="chart-box">{svg}</figure>'
    # No "<" inside a script element ("</script>" would end it, "<!--" changes how it is
    # parsed): JSON spells it \u003c.
    payload = json.dumps(chart_data(chart), separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return (
        f'<figure class="chart-box">{svg}<script type="application/json" class="chart-data">{payload}</script></figure>'
    )


def hint() -> str:
    """How to use the charts: shown once charts.js has drawn them (a page without scripts
    keeps the static charts); a note when the library is missing."""
    if chart_library() is None:
        return (
            '<p class="note">Static charts: this controller was installed without its chart '
            "library (make report-assets).</p>"
        )
    return f'<p class="chart-hint">Charts: {HINT}.</p>'


def scripts() -> str:
    """uPlot (with its licence) and charts.js, once at the end of a page; empty without them."""
    library = chart_library()
    if library is None:
        return ""
    return (
        f"<style>{library.css}</style>\n"
        f"<!-- uPlot, embedded so that this file opens offline. {_comment(library.license)} -->\n"
        f"<script>{library.script}</script>\n"
        f"<script>{library.glue}</script>"
    )


def _comment(text: str) -> str:
    return " ".join(text.replace("--", "- -").split())
