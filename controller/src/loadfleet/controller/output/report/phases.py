"""report.html's "Where the time goes": per target and request, a response's mean latency
split into its phases (queueing, connect, TLS, waiting, receiving, and what no phase covers) as
stacked bars, and a table of the same figures (summary.json's `figures.phases`).

Contract: `phases_section(summary)` returns HTML elements (an empty list when no driver
measured phases). Bars are inline SVG, so the section needs no script.
"""

from __future__ import annotations

from html import escape
from typing import Any

from loadfleet.controller.model.summarydoc import Entry, Phases, SummaryDoc
from loadfleet.controller.output.report.page import fmt_count, fmt_ms, table
from loadfleet.controller.output.report.svg import PALETTE

# The segments of a bar, in the order they happen, with the summary's field of each.
SEGMENTS = (
    ("queueing (for a worker, connection or stream)", "queueing"),
    ("connect", "connect"),
    ("TLS", "tls"),
    ("waiting (time to first byte)", "waiting"),
    ("receiving", "receiving"),
    ("other (writing the request)", "other"),
)
HEADERS = (
    "",
    "responses",
    "queueing ms",
    "connect ms",
    "TLS ms",
    "waiting ms",
    "receiving ms",
    "other ms",
    "mean ms",
    "waiting p50 ms",
    "waiting p99 ms",
    "connect mean ms",
    "TLS mean ms",
)
_WIDTH = 760
_LABEL_PX = 220
_BAR_PX = 18
_ROW_PX = 26
_LEGEND_PX = 30


def phases_section(summary: dict[str, Any]) -> list[str]:
    entries = _entries(summary)
    if not entries:
        return []
    return [
        "<h2>Where the time goes</h2>",
        '<p class="note">A response\'s mean latency in phases. Connect and TLS are spread over every '
        "response (a kept-alive connection connects once); their means in the last columns are over the "
        "responses that opened a connection. docs/metrics.md defines each phase.</p>",
        stacked_bars(entries),
        table(HEADERS, [_table_row(name, p) for name, p in entries], css_class="phases"),
    ]


def _entries(summary: dict[str, Any]) -> list[tuple[str, Phases]]:
    """(name, phases) of the total, then each target and request when there are several."""

    def phases_of(entry: Entry) -> Phases | None:
        phases = entry.figures.phases
        return phases if phases is not None and phases.responses else None

    doc = SummaryDoc.of(summary)
    entries = [("total", phases_of(doc.total))]
    for items, prefix in ((doc.targets, "target "), (doc.requests, "request ")):
        if len(items) > 1:
            entries += [(prefix + str(e.name), phases_of(e)) for e in items]
    return [(name, p) for name, p in entries if p]


def _values(phases: Phases) -> list[float]:
    return [
        float(phases.phase(field).per_response_ms) if field != "other" else float(phases.other_ms)
        for _, field in SEGMENTS
    ]


def stacked_bars(entries: list[tuple[str, Phases]]) -> str:
    longest = max(sum(_values(p)) for _, p in entries) or 1.0
    scale = (_WIDTH - _LABEL_PX - 80) / longest
    height = _LEGEND_PX + _ROW_PX * len(entries) + 8
    out = [
        f'<svg class="chart phases" width="{_WIDTH}" height="{height}" viewBox="0 0 {_WIDTH} {height}" '
        'xmlns="http://www.w3.org/2000/svg" font-size="12" font-family="system-ui, sans-serif">'
    ]
    x: float = 0
    for i, (label, _) in enumerate(SEGMENTS):
        out.append(
            f'<rect x="{x}" y="6" width="12" height="12" fill="{PALETTE[i]}"/>'
            f'<text x="{x + 16}" y="16">{escape(label)}</text>'
        )
        x += 24 + 7 * len(label)
    for row, (name, phases) in enumerate(entries):
        y = _LEGEND_PX + row * _ROW_PX
        out.append(f'<text x="{_LABEL_PX - 8}" y="{y + 13}" text-anchor="end">{escape(name[:32])}</text>')
        x = float(_LABEL_PX)
        for i, ((label, _), ms) in enumerate(zip(SEGMENTS, _values(phases))):
            if ms > 0:
                out.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{ms * scale:.1f}" height="{_BAR_PX}" '
                    f'fill="{PALETTE[i]}"><title>{escape(name)}: {escape(label)} {ms:.3f} ms</title></rect>'
                )
                x += ms * scale
        out.append(f'<text x="{x + 6:.1f}" y="{y + 13}">{sum(_values(phases)):.3f} ms</text>')
    out.append("</svg>")
    return "".join(out)


def _table_row(name: str, phases: Phases) -> list[str]:
    values = _values(phases)
    return [
        name,
        fmt_count(phases.responses),
        *(fmt_ms(v) for v in values),
        fmt_ms(sum(values)),
        fmt_ms(phases.waiting_p50_ms),
        fmt_ms(phases.waiting_p99_ms),
        *(fmt_ms(phases.phase(p).mean_ms) if phases.phase(p).count else "-" for p in ("connect", "tls")),
    ]
