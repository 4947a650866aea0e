"""report.html's *Scenarios* section (a plan with `scenarios:`): what each scenario was asked
to run, its figures over the run and per request; its rate and p99 over time are charts
(html.py, from intervals.csv's per-scenario totals).

Contract: `scenarios_section(run)` returns HTML elements; an empty list for a plain plan.
"""

from __future__ import annotations

from html import escape

from loadfleet.controller.model.summarydoc import ScenarioDoc
from loadfleet.controller.output.report.figuresrow import SUMMARY_HEADERS, figures_row
from loadfleet.controller.output.report.page import table
from loadfleet.controller.output.report.rundata import RunData

_HEADERS = ("scenario", "model", "load", "from s", "for s", "budget")


def scenarios_section(run: RunData) -> list[str]:
    """A scenario's figures read as the run's total does (the summary table's columns)."""
    scenarios = run.summary_doc.scenarios
    if not scenarios:
        return []
    section = [
        "<h2>Scenarios</h2>",
        table(_HEADERS, [_asked(s) for s in scenarios], css_class="scenarios"),
        table(SUMMARY_HEADERS, [figures_row(s.name, s.total) for s in scenarios], css_class="summary"),
    ]
    for s in scenarios:
        if len(s.requests) > 1:
            section.append(f"<h3>Scenario {escape(s.name)}: requests</h3>")
            section.append(table(SUMMARY_HEADERS, [figures_row(r.name, r) for r in s.requests], css_class="summary"))
    return section


def _asked(s: ScenarioDoc) -> list[str]:
    return [
        s.name,
        s.model,
        s.load,
        f"{s.start_after_s:g}",
        "to the end" if s.duration_s is None else f"{s.duration_s:g}",
        f"{s.budget:,} requests" if s.budget else "none",
    ]
