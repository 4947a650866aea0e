"""Verdicts: each finding's metric evaluated (evaluate.py) over the means of every pass and over
each pass on its own, and judged strictly (issue 34):

- a finding **holds** only when it holds in every pass, at least MIN_PASSES of them, or when a
  95 % confidence interval of its per-pass values (Student's t) lies wholly on the holding side
  of the threshold (the passes that fail are then within the noise of the others);
- with fewer than MIN_PASSES evaluated passes it is **not enough passes (n of 3)**, never holds,
  unless a pass fails: a failing pass is evidence against it, whatever the count;
- a cell it reads with a step that measured no request under load **fails** it (CellFails);
- the steps loadfleet marked invalid are excluded from its figures and counted in its text;
- what the study's design decides before it runs is flagged (design.py).

A pure function of findings and observations."""

from __future__ import annotations

import enum
import math
import statistics
from dataclasses import dataclass, field

from .design import design_flags
from .evaluate import CellFails, CellSet, NotEvaluable, Observation, number, same, scrutinised_metric
from .findings import Finding
from .metric import MetricSyntaxError

MIN_PASSES = 3  # passes a finding needs before it can hold (issue 34)
# Student's t at 97.5 % (a two-sided 95 % interval) by degrees of freedom; above 30, the normal's.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
T_975_LARGE = {20: 2.086, 30: 2.042}
Z_975 = 1.96


class Status(enum.Enum):
    HOLDS = "holds"
    FAILS = "fails"
    NOT_ENOUGH_PASSES = "not enough passes"
    NOT_EVALUABLE = "not evaluable"


@dataclass(frozen=True)
class Verdict:
    finding: Finding
    status: Status
    value: object = None  # float, str, or {level: value} for `@ each`
    reason: str = ""  # why not evaluable / how it was judged, the invalid steps, the design flags
    passes: tuple = field(default=())  # ((pass_no, Status, value), ...)

    def passes_holding(self) -> tuple[int, int]:
        evaluated = [p for p in self.passes if p[1] is not Status.NOT_EVALUABLE]
        return sum(p[1] is Status.HOLDS for p in evaluated), len(evaluated)


def compare(value, comparison: str, threshold) -> bool:
    """One value against the finding's threshold (a dict of levels must hold at every level)."""
    if isinstance(value, dict):
        return all(compare(v, comparison, threshold) for v in value.values())
    if comparison == "==":
        return same(value, threshold)
    numeric = number(value)
    if numeric is None or math.isnan(numeric):
        return False
    if comparison == "between":
        low, high = threshold
        return low <= numeric <= high
    return {"<": numeric < threshold, "<=": numeric <= threshold, ">": numeric > threshold, ">=": numeric >= threshold}[
        comparison
    ]


def t_975(dof: int) -> float:
    if dof in T_975:
        return T_975[dof]
    return next((t for limit, t in sorted(T_975_LARGE.items()) if dof <= limit), Z_975)


def confidence_interval(values: list[float]) -> tuple[float, float] | None:
    """The 95 % interval of the mean of `values` (None with fewer than 2 or a non-finite one)."""
    if len(values) < 2 or not all(math.isfinite(v) for v in values):
        return None
    half = t_975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    mean = statistics.mean(values)
    return mean - half, mean + half


def interval_excludes(interval: tuple[float, float], comparison: str, threshold) -> bool:
    """True when the whole interval is on the holding side of the threshold."""
    low, high = interval
    if comparison == "between":
        return compare(low, comparison, threshold) and compare(high, comparison, threshold)
    if comparison in (">", ">="):
        return compare(low, comparison, threshold)
    if comparison in ("<", "<="):
        return compare(high, comparison, threshold)
    return False


def _verdict_of(finding: Finding, observations: list[Observation]) -> tuple[Status, object, str]:
    if isinstance(finding.threshold, str) and not any(
        same(v, finding.threshold) for o in observations for v in o.vars.values()
    ):  # "is IIS the best?" asked of runs without IIS: whatever the runs' best is, it cannot answer
        return Status.NOT_EVALUABLE, None, f"no run has {finding.threshold!r} (the lab has no such cell)"
    try:
        value, scrutiny = scrutinised_metric(finding.metric, observations)
        if isinstance(value, CellSet):
            value = value.scalar()
    except CellFails as exc:
        return Status.FAILS, None, f"a cell failed: {exc}"
    except (NotEvaluable, MetricSyntaxError) as exc:
        return Status.NOT_EVALUABLE, None, str(exc)
    holds = compare(value, finding.comparison, finding.threshold)
    return (Status.HOLDS if holds else Status.FAILS), value, scrutiny.text()


def judge(finding: Finding, overall: Status, per_pass: tuple) -> tuple[Status, str]:
    """The strict status over the per-pass verdicts (module docstring), with how it was reached."""
    if overall is Status.NOT_EVALUABLE:
        return overall, ""
    evaluated = [p for p in per_pass if p[1] is not Status.NOT_EVALUABLE]
    held = sum(p[1] is Status.HOLDS for p in evaluated)
    tally = f"holds in {held} of {len(evaluated)} passes"
    if len(evaluated) < MIN_PASSES:
        if held < len(evaluated) or (overall is Status.FAILS and not evaluated):
            return Status.FAILS, tally
        return Status.NOT_ENOUGH_PASSES, f"not enough passes ({len(evaluated)} of {MIN_PASSES}); {tally}"
    if held == len(evaluated):
        return Status.HOLDS, tally
    values = [number(p[2]) for p in evaluated]
    interval = confidence_interval(values) if None not in values else None
    if interval and interval_excludes(interval, finding.comparison, finding.threshold):
        return Status.HOLDS, f"{tally}; the passes' 95 % interval [{interval[0]:.3g}, {interval[1]:.3g}] excludes it"
    return Status.FAILS, tally


def evaluate_findings(findings: list[Finding], observations: list[Observation]) -> list[Verdict]:
    """One verdict per finding, in order: over the means of every pass, and per pass, judged strictly."""
    passes = sorted({o.pass_no for o in observations})
    verdicts = []
    for finding in findings:
        overall, value, reason = _verdict_of(finding, observations)
        per_pass = tuple((p, *_verdict_of(finding, [o for o in observations if o.pass_no == p])[:2]) for p in passes)
        status, how = judge(finding, overall, per_pass)
        notes = [how, reason] if overall is not Status.NOT_EVALUABLE else [reason]
        notes += design_flags(finding, observations) if overall is not Status.NOT_EVALUABLE else []
        verdicts.append(Verdict(finding, status, value, "; ".join(n for n in notes if n), per_pass))
    return verdicts


def format_value(value) -> str:
    if isinstance(value, dict):  # `@ each`; nested levels in parentheses
        shown = ((k, format_value(v), isinstance(v, dict)) for k, v in value.items())
        return ", ".join(f"{k}: ({text})" if nested else f"{k}: {text}" for k, text, nested in shown)
    numeric = number(value)
    if numeric is None:
        return str(value)
    return f"{numeric:.3g}" if abs(numeric) < 1000 else f"{numeric:,.0f}"
