"""report.html's "Verdict", its first section: the run's verdict line and a row per threshold
(the console's words: model/thresholdtext.py), each failed one in red with its failing steps.
Nothing for a run without thresholds."""

from __future__ import annotations

from html import escape
from typing import Any

from loadfleet.controller.model.summarydoc import SummaryDoc
from loadfleet.controller.model.thresholdtext import THRESHOLD_HEADERS, threshold_cells, verdict_line
from loadfleet.controller.output.report.page import table

VERDICT_HEADERS = (*THRESHOLD_HEADERS, "failing steps")


def verdict_section(summary: dict[str, Any]) -> list[str]:
    doc = SummaryDoc.of(summary)
    if not doc.thresholds:
        return []
    line = verdict_line(doc.thresholds, doc.verdict)
    passed = line.startswith("verdict: passed")
    rows = [[*threshold_cells(r), ", ".join(r.failing_steps) or "-"] for r in doc.thresholds]
    classes = [r.outcome.value for r in doc.thresholds]  # tr.failed is red
    return [
        "<h2>Verdict</h2>",
        f'<p class="verdict {"good" if passed else "bad"}">{escape(line)}</p>',
        table(VERDICT_HEADERS, rows, css_class="thresholds", row_classes=classes),
    ]
