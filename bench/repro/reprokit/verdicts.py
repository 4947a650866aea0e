"""Verdicts: each finding's metric evaluated (evaluate.py) and compared with its threshold, over
the means of every pass and for each pass on its own, so a verdict says in how many passes it
held. A pure function of findings and observations."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from .evaluate import CellSet, NotEvaluable, Observation, evaluate_metric, number, same
from .findings import Finding
from .metric import MetricSyntaxError


class Status(enum.Enum):
    HOLDS = "holds"
    FAILS = "fails"
    NOT_EVALUABLE = "not evaluable"


@dataclass(frozen=True)
class Verdict:
    finding: Finding
    status: Status
    value: object = None  # float, str, or {level: value} for `@ each`
    reason: str = ""
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


def _verdict_of(finding: Finding, observations: list[Observation]) -> tuple[Status, object, str]:
    try:
        value = evaluate_metric(finding.metric, observations)
        if isinstance(value, CellSet):
            value = value.scalar()
    except (NotEvaluable, MetricSyntaxError) as exc:
        return Status.NOT_EVALUABLE, None, str(exc)
    if isinstance(finding.threshold, str) and not any(
        same(v, finding.threshold) for o in observations for v in o.vars.values()
    ):  # "is IIS the best?" asked of runs without IIS: the runs' best cannot answer it
        return Status.NOT_EVALUABLE, value, f"no run has {finding.threshold!r} (the lab has no such cell)"
    holds = compare(value, finding.comparison, finding.threshold)
    return (Status.HOLDS if holds else Status.FAILS), value, ""


def evaluate_findings(findings: list[Finding], observations: list[Observation]) -> list[Verdict]:
    """One verdict per finding, in order: over the means of every pass, and per pass."""
    passes = sorted({o.pass_no for o in observations})
    verdicts = []
    for finding in findings:
        status, value, reason = _verdict_of(finding, observations)
        per_pass = (
            tuple((p, *_verdict_of(finding, [o for o in observations if o.pass_no == p])[:2]) for p in passes)
            if len(passes) > 1
            else ()
        )
        verdicts.append(Verdict(finding, status, value, reason, per_pass))
    return verdicts


def format_value(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {format_value(v)}" for k, v in value.items())
    numeric = number(value)
    if numeric is None:
        return str(value)
    return f"{numeric:.3g}" if abs(numeric) < 1000 else f"{numeric:,.0f}"
