"""The thresholds' results and the run's verdict in words: the same table and verdict line on
the console and in report.html (which reads only model/, so the words live here)."""

from __future__ import annotations

from collections.abc import Sequence

from loadfleet.controller.model.errors import EXIT_THRESHOLD_FAILED
from loadfleet.controller.model.thresholdresult import Outcome, RunVerdict, ThresholdResult

THRESHOLD_HEADERS = ("threshold", "scope", "over", "value", "outcome")
# What a value of nothing shows (the latency of no response).
NO_VALUE = "-"


def threshold_title(r: ThresholdResult) -> str:
    """Its limit in words, after its name when the plan named it ("enough load: rps > 1000")."""
    return r.text if r.name in ("", r.text) else f"{r.name}: {r.text}"


def value_text(r: ThresholdResult) -> str:
    if r.value is None:
        return NO_VALUE
    return f"{r.value:,.2f}" + (f" {r.unit}" if r.unit and r.unit != "/s" else r.unit)


def outcome_text(r: ThresholdResult) -> str:
    """PASSED, FAILED or INCONCLUSIVE, then why when it did not pass."""
    why = [r.reason] if r.reason and not r.passed else []
    why += ["ended the run early"] if r.aborted else []
    return r.outcome.value.upper() + (f" ({'; '.join(why)})" if why else "")


def details(r: ThresholdResult) -> list[str]:
    """What more a result has to say, a phrase each: its failing steps, its abort, the intervals
    it left out (JUnit's and Markdown's words)."""
    out = []
    if r.failing_steps:
        out.append("failing steps: " + ", ".join(r.failing_steps))
    if r.aborted:
        out.append("its abort ended the run")
    if r.excluded_intervals:
        out.append(f"{r.excluded_intervals} intervals left out as generator-bound")
    return out


def threshold_cells(r: ThresholdResult) -> tuple[str, str, str, str, str]:
    """A row under THRESHOLD_HEADERS."""
    return (threshold_title(r), r.scope, r.over, value_text(r), outcome_text(r))


def verdict_line(thresholds: Sequence[ThresholdResult], verdict: RunVerdict | None) -> str:
    """ "verdict: failed — 1 of 3 thresholds failed (exit 4)"; "" without thresholds. With
    results but no verdict (a summary cut short), the verdict is the results' own."""
    if not thresholds:
        return ""
    failed = sum(r.outcome is Outcome.FAILED for r in thresholds)
    inconclusive = sum(r.outcome is Outcome.INCONCLUSIVE for r in thresholds)
    passed = verdict.passed if verdict is not None else not failed
    counted = f"{failed} of {len(thresholds)} threshold{'s' * (len(thresholds) > 1)} failed"
    counted += f", {inconclusive} inconclusive" if inconclusive else ""
    return f"verdict: {'passed' if passed else 'failed'} — {counted}" + (
        "" if passed else f" (exit {EXIT_THRESHOLD_FAILED})"
    )
