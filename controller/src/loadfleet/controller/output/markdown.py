"""Markdown of a run's verdict and of a regression gate: the summary a pipeline posts (a GitHub
job summary, a merge-request comment). One verdict line first, then tables."""

from __future__ import annotations

from loadfleet.controller.model import thresholdtext
from loadfleet.controller.model.errors import (
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_STOPPED_BY_CONDITION,
    EXIT_THRESHOLD_FAILED,
)
from loadfleet.controller.model.gateresult import GateOutcome, GateReport
from loadfleet.controller.model.summarydoc import SummaryDoc
from loadfleet.controller.model.thresholdresult import Outcome, ThresholdResult
from loadfleet.controller.model.verdict import Validity

from . import verdicttext
from .report import REPORT_FILE

# The verdict line of a run by its exit code (cli/follow.py's rule; docs/cli.md "Exit codes").
_RUN_VERDICT = {
    EXIT_OK: "✅ **passed** (exit 0): every threshold passed",
    EXIT_STOPPED_BY_CONDITION: "✅ **passed, stopped early** (exit 3): a stop condition ended the run "
    "and every threshold passed",
    EXIT_THRESHOLD_FAILED: "❌ **threshold failed** (exit 4)",
    EXIT_RUN_FAILED: "❌ **run failed** (exit 1): the run failed or its files are incomplete",
}
_THRESHOLD_MARK = {Outcome.PASSED: "✅ passed", Outcome.FAILED: "❌ failed", Outcome.INCONCLUSIVE: "⚠️ inconclusive"}

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


def run_markdown(read: SummaryDoc, *, exit_code: int, run_dir: str) -> str:
    """The verdict line the exit code calls for, the run in one line, the thresholds' table,
    the generator's validity, and where report.html is (`run_dir` as the controller wrote it)."""
    lines = [_run_verdict(read, exit_code), "", _run_line(read)]
    if read.thresholds:
        lines += ["", *_table(("threshold", "over", "scope", "value", "result", "why"))]
        lines += [_threshold_row(r) for r in read.thresholds]
    # Checks (issue 30, J8): a table of each request × check's pass rate goes here.
    if validity := _validity_line(read):
        lines += ["", validity]
    if run_dir:
        lines += ["", f"Report: `{_code(run_dir.rstrip('/'))}/{REPORT_FILE}`"]
    return "\n".join(lines) + "\n"


def _run_verdict(read: SummaryDoc, exit_code: int) -> str:
    line = _RUN_VERDICT.get(exit_code, f"❌ **error** (exit {exit_code})")
    if exit_code == EXIT_THRESHOLD_FAILED and read.verdict and read.verdict.reasons:
        line += ": " + _escape("; ".join(read.verdict.reasons))
    elif exit_code == EXIT_RUN_FAILED and read.incomplete_files:
        line += ": incomplete " + _escape(", ".join(read.incomplete_files))
    elif exit_code == EXIT_RUN_FAILED and read.message:
        line += ": " + _escape(read.message)
    elif exit_code == EXIT_STOPPED_BY_CONDITION and read.stop:
        line += ": " + _escape(read.stop.text)
    return line


def _run_line(read: SummaryDoc) -> str:
    figures = read.total.figures
    ok = "n/a" if figures.ok_rps is None else verdicttext.number(figures.ok_rps, "/s")
    return (
        f"Run `{_code(read.run_id or '?')}` of plan `{_code(read.plan_name or '?')}`: "
        f"{figures.requests:,} requests in {read.duration_s:.0f} s, "
        f"{verdicttext.number(figures.rps, '/s')} sent, {ok} ok, {verdicttext.number(figures.error_pct, '%')} errors."
    )


def _threshold_row(result: ThresholdResult) -> str:
    why = [result.reason] if result.reason else []
    why += thresholdtext.details(result)
    return _row(
        (
            thresholdtext.threshold_title(result),
            result.over,
            result.scope,
            verdicttext.threshold_value(result),
            _THRESHOLD_MARK[result.outcome],
            "; ".join(why),
        )
    )


def _validity_line(read: SummaryDoc) -> str:
    """Whether the figures measured the target or the generator: steps judged generator-bound
    (their figures are the generator's limit) or suspect; nothing for a summary without steps.
    Read from the steps, which is what summary.json's generator_bound_steps and suspect_steps
    list."""
    if not read.steps:
        return ""
    bound = [s.name for s in read.steps if s.generator_bound]
    suspect = [s.name for s in read.steps if s.validity == Validity.SUSPECT]
    if not bound and not suspect:
        return "Generator: every step's figures are valid (the generator kept up)."
    parts = []
    if bound:
        parts.append("generator-bound (the figures are the generator's limit, not the target's): " + ", ".join(bound))
    if suspect:
        parts.append("suspect: " + ", ".join(suspect))
    return "⚠️ Generator: " + _escape("; ".join(parts)) + "."


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
        lines += ["", *_table((*verdicttext.GATE_HEADERS, "verdict", "why"))]
        lines += [_row((*verdicttext.gate_cells(f), _GATE_MARK[f.outcome], f.reason)) for f in report.figures]
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
