"""Markdown of a run's verdict and of a regression gate: the summary a pipeline posts (a GitHub
job summary, a merge-request comment). One verdict line first, then tables."""

from __future__ import annotations

from loadfleet.controller.model.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_THRESHOLD_FAILED
from loadfleet.controller.model.gateresult import GateOutcome, GateReport

from . import verdicttext

_GATE_VERDICT = {
    EXIT_OK: "✅ **gate passed** (exit 0): no gated figure regressed",
    EXIT_THRESHOLD_FAILED: "❌ **regression** (exit 4): a gated figure got worse beyond its tolerance",
    EXIT_INCONCLUSIVE: "⚠️ **inconclusive** (exit 5): the runs cannot tell, and nothing regressed",
}
_GATE_MARK = {
    GateOutcome.PASS: "✅ pass",
    GateOutcome.IMPROVEMENT: "✅ improvement",
    GateOutcome.REGRESSION: "❌ regression",
    GateOutcome.INCONCLUSIVE: "⚠️ inconclusive",
}


def gate_markdown(report: GateReport) -> str:
    """The verdict line, why nothing could be judged (when so), a table with a row per gated
    figure, and the method."""
    lines = [
        _GATE_VERDICT[report.exit_code],
        "",
        f"Base `{_code(report.base_run)}`, candidate `{_code(report.candidate_run)}`.",
    ]
    if report.inconclusive_reasons:
        lines += ["", *(f"- not comparable: {_escape(r)}" for r in report.inconclusive_reasons)]
    if report.figures:
        lines += ["", *_table(("figure", "tolerance", "base", "candidate", "change", "95 % CI", "verdict", "why"))]
        for f in report.figures:
            row = (
                f.figure,
                f.tolerance,
                verdicttext.number(f.base),
                verdicttext.number(f.candidate),
                verdicttext.change(f),
                verdicttext.interval(f),
                _GATE_MARK[f.outcome],
                f.reason,
            )
            lines.append(_row(row))
    lines += ["", f"Method: {_escape(report.method)}."]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ Markdown text


def _table(header: tuple[str, ...]) -> list[str]:
    return [_row(header), "|" + "|".join("---" for _ in header) + "|"]


def _row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(_escape(c) for c in cells) + " |"


def _escape(text: str) -> str:
    """A cell's text that cannot end its cell or line: pipes escaped, line breaks as spaces."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _code(text: str) -> str:
    return text.replace("`", "'")
