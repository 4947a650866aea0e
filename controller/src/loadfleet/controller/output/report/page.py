"""The HTML around reports: one self-contained page (inline CSS and scripts, no external
URL), tables, and the number formats tables use."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from loadfleet.controller import __version__

_CSS = """
body { font-family: system-ui, sans-serif; margin: 24px auto; max-width: 1560px; padding: 0 16px;
       color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; }
dl.facts dt { color: #666; } dl.facts dd { margin: 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th:first-child, td:first-child, td.text, th.text { text-align: left; }
thead th { background: #f4f4f4; }
table.events td, table.events th { text-align: left; }
tr.group td { background: #fafafa; font-weight: bold; text-align: left; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
svg.chart { border: 1px solid #eee; background: #fff; }
figure.chart-box { margin: 0; }
figure.chart-box.interactive > svg.chart { display: none; }
.chart-interactive { border: 1px solid #eee; background: #fff; padding-top: 4px; }
.chart-hint { display: none; color: #666; font-size: 12px; }
body.charts-interactive .chart-hint { display: block; }
p.note { color: #666; font-size: 12px; }
.state-failed, .bad { color: #b00; font-weight: bold; }
tr.failed td { color: #b00; }
table.thresholds td:first-child, table.thresholds td:last-child { text-align: left; }
p.verdict { font-size: 15px; } p.verdict.good { color: #070; font-weight: bold; }
footer { margin-top: 32px; color: #888; font-size: 12px; }
"""


def page(title: str, body: str, scripts: str = "") -> str:
    """`scripts` go at the end of the body, after everything they draw on."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>\n"
        f"<body>\n{body}\n<footer>made by loadfleet {escape(__version__)}</footer>\n{scripts}\n</body></html>\n"
    )


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str] | str],
    *,
    css_class: str = "",
    row_classes: Sequence[str] = (),
) -> str:
    """Cells are escaped here; a row given as a plain string is a group heading; `row_classes`:
    each row's class, in order (e.g. `failed`, drawn in red)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        if isinstance(row, str):
            body.append(f'<tr class="group"><td colspan="{len(headers)}">{escape(row)}</td></tr>')
        else:
            cls = f' class="{escape(row_classes[i])}"' if i < len(row_classes) and row_classes[i] else ""
            body.append(f"<tr{cls}>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>")
    cls = f' class="{css_class}"' if css_class else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def facts(items: Sequence[tuple[str, str]]) -> str:
    return '<dl class="facts">' + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in items) + "</dl>"


def fmt_count(value: float) -> str:
    return f"{int(value):,}"


def fmt_rate(value: float) -> str:
    return f"{value:,.1f}"


def fmt_ms(value: float) -> str:
    return f"{value:.3f}"


def fmt_pct(value: float) -> str:
    return f"{value:.2f}"
