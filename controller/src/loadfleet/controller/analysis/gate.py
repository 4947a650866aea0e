"""The regression gate: whether a candidate run's figures changed against a base run's beyond
a tolerance, stated with a confidence interval (docs/results.md "Gating a change").

Each run's measured intervals that the generators did not invalidate (gaterun.py) are
resampled on their own by a moving-block bootstrap (bootstrap.py), B = 2,000 times, seeded by
the two run ids. A resample's figures are those of its intervals merged exactly: the (B × n)
multiplicities times the (n × K) histogram buckets give every resample's merged histogram at
once, and times the intervals' counts its requests, successes and failures. The change
Δ = candidate − base (in % of the base's when the tolerance is relative) of paired resamples
gives the 95 % percentile interval, and the verdict, in the equivalence style (so noise never
reads as a pass):

    regression   the whole interval lies beyond the tolerance on the bad side
    improvement  the whole interval lies beyond the tolerance on the good side
    pass         the interval's bad-side end lies within the tolerance
    inconclusive otherwise: the runs cannot tell

Every figure is inconclusive, whatever its interval, when the runs cannot be compared: a run
not finished, fewer than MIN_INTERVALS usable intervals, more than MAX_INVALID_SHARE of its
measured intervals invalid, or plans that differ (unless allowed); a latency figure is when a
run had no ok response.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from loadfleet.controller.analysis import bootstrap
from loadfleet.controller.analysis.gaterun import GateRun, Intervals, plan_differences
from loadfleet.controller.analysis.gatespec import GatedFigure, GateSpec
from loadfleet.controller.model.gateresult import GateFigure, GateOutcome, GateReport
from loadfleet.wire.histogram import HIGHEST_VALUE

MIN_INTERVALS = 20  # usable intervals a run needs at least: fewer make too few blocks to resample
MAX_INVALID_SHARE = 0.10  # of a run's measured intervals; beyond, it measured its generators
FINISHED = "finished"
_SHOWN_KEYS = 10  # differing plan keys named in a reason at most (then "and N more")


@dataclass(frozen=True)
class _Values:
    """A figure of one run: over all its usable intervals (`point`) and per resample."""

    point: float
    resampled: np.ndarray


def judge(
    base: GateRun,
    candidate: GateRun,
    specs: Sequence[GateSpec],
    *,
    allow_plan_change: bool = False,
    resamples: int = bootstrap.RESAMPLES,
) -> GateReport:
    """The gate's report on `specs` (in their order) for these two runs."""
    reasons = comparability(base, candidate, allow_plan_change=allow_plan_change)
    figures = sorted({s.figure for s in specs}, key=list(GatedFigure).index)
    seeds = bootstrap.seed_of(base.run_id, candidate.run_id).spawn(2)
    values = [
        _figures(run, figures, np.random.default_rng(seed), resamples) for run, seed in zip((base, candidate), seeds)
    ]
    runs = (base, candidate)
    judged = tuple(
        _judge_figure(spec, runs, (values[0].get(spec.figure), values[1].get(spec.figure)), reasons) for spec in specs
    )
    return GateReport(
        base_run=base.run_id,
        candidate_run=candidate.run_id,
        figures=judged,
        method=_method(base, candidate, resamples),
        inconclusive_reasons=tuple(reasons),
    )


def comparability(base: GateRun, candidate: GateRun, *, allow_plan_change: bool = False) -> list[str]:
    """Why the two runs cannot be compared at all; [] when they can."""
    reasons = []
    for role, run in (("base", base), ("candidate", candidate)):
        if run.state != FINISHED:
            reasons.append(f"the {role} run {run.run_id} is {run.state or 'of unknown state'}, not {FINISHED}")
        if run.intervals.n < MIN_INTERVALS:
            reasons.append(
                f"the {role} run {run.run_id} has {run.intervals.n} measured valid intervals, "
                f"fewer than the {MIN_INTERVALS} a verdict needs"
            )
        if run.measured and run.invalid > MAX_INVALID_SHARE * run.measured:
            reasons.append(
                f"the {role} run {run.run_id} has {run.invalid} of {run.measured} measured intervals invalid "
                f"(more than {MAX_INVALID_SHARE * 100:g} %): its figures are partly its generators'"
            )
    if not allow_plan_change:
        reasons += _plan_reasons(base, candidate)
    return reasons


def _plan_reasons(base: GateRun, candidate: GateRun) -> list[str]:
    missing = [r.run_id for r in (base, candidate) if r.plan is None]
    if missing:
        return [f"no plan.yaml in run {', '.join(missing)}: the plans cannot be compared (--allow-plan-change)"]
    assert base.plan is not None and candidate.plan is not None
    keys = plan_differences(base.plan, candidate.plan)
    if not keys:
        return []
    shown = ", ".join(keys[:_SHOWN_KEYS]) + (f" and {len(keys) - _SHOWN_KEYS} more" if len(keys) > _SHOWN_KEYS else "")
    return [f"the plans differ in {shown} (--allow-plan-change accepts that)"]


def _method(base: GateRun, candidate: GateRun, resamples: int) -> str:
    nb, nc = base.intervals.n, candidate.intervals.n
    return (
        f"moving-block bootstrap over measured valid intervals (base {nb} in blocks of "
        f"{bootstrap.block_length(nb)}, candidate {nc} in blocks of {bootstrap.block_length(nc)}), "
        f"{resamples:,} resamples, {bootstrap.CONFIDENCE * 100:g} % percentile interval"
    )


# ------------------------------------------------------------------ one run's figures


def _figures(
    run: GateRun, figures: list[GatedFigure], rng: np.random.Generator, resamples: int
) -> dict[GatedFigure, _Values]:
    """Each figure over the run's usable intervals and over each resample of them; none for a
    run of fewer than 2 intervals (nothing to resample)."""
    intervals = run.intervals
    if intervals.n < 2:
        return {}
    point = _weighted(intervals, np.ones((1, intervals.n)), figures)
    parts = [_weighted(intervals, w.astype(np.float64), figures) for w in bootstrap.chunks(rng, intervals.n, resamples)]
    return {f: _Values(float(point[f][0]), np.concatenate([p[f] for p in parts])) for f in figures}


def _weighted(intervals: Intervals, weights: np.ndarray, figures: list[GatedFigure]) -> dict[GatedFigure, np.ndarray]:
    """The figures of the intervals merged with these multiplicities (one row per resample):
    sums are weighted sums, so the merge is exact. NaN: a latency of no response."""
    n = weights.sum(axis=1)  # intervals per resample (every interval as long as the others)
    requests, failed = weights @ intervals.requests, weights @ intervals.failed
    responses = weights @ intervals.responses
    out = {
        GatedFigure.RPS: weights @ intervals.rps / n,  # the mean of equal intervals' rates is the pooled rate
        GatedFigure.OK_RPS: weights @ intervals.ok_rps / n,
        GatedFigure.ERROR_PCT: np.divide(100 * failed, requests, out=np.zeros_like(requests), where=requests > 0),
        GatedFigure.MEAN_MS: _ratio(weights @ intervals.latency_sum_ms, responses),
        GatedFigure.MAX_MS: _max(weights, intervals.max_ms),
    }
    wanted = [f for f in figures if f.percent is not None]
    if wanted:
        out.update(zip(wanted, _percentiles(weights, intervals, [f.percent or 0.0 for f in wanted]).T))
    return {f: out[f] for f in figures}


def _ratio(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    ratio: np.ndarray = np.divide(sums, counts, out=np.full_like(sums, np.nan), where=counts > 0)
    return ratio


def _max(weights: np.ndarray, max_ms: np.ndarray) -> np.ndarray:
    """The highest maximum of the intervals each resample holds (NaN: none had a response)."""
    held = np.where(weights > 0, np.nan_to_num(max_ms, nan=-np.inf)[None, :], -np.inf).max(axis=1)
    return np.where(np.isfinite(held), held, np.nan)


def _percentiles(weights: np.ndarray, intervals: Intervals, percents: list[float]) -> np.ndarray:
    """(rows × percents) in ms: each row's merged histogram (the multiplicities times the
    intervals' buckets) read as hdrh reads a percentile (wire/histogram.py): the highest value
    equivalent to the first bucket whose cumulative count reaches max(1, round(p % of the total))."""
    if intervals.counts is None or intervals.buckets is None:
        raise ValueError("a request's latency has no histogram: its percentiles cannot be gated")
    rows = weights.shape[0]
    if not len(intervals.buckets):
        return np.full((rows, len(percents)), np.nan)
    cumulative = np.cumsum(weights @ intervals.counts, axis=1)
    total = cumulative[:, -1]
    values = np.empty((rows, len(percents)))
    top = HIGHEST_VALUE[intervals.buckets] / 1000
    for j, p in enumerate(percents):
        target = np.maximum(1, np.floor(p * total / 100 + 0.5))
        at = np.minimum((cumulative < target[:, None]).sum(axis=1), len(top) - 1)
        values[:, j] = np.where(total > 0, top[at], np.nan)
    return values


# ------------------------------------------------------------------ the verdict


def outcome_of(low: float, high: float, tolerance: float, *, worse_up: bool) -> GateOutcome:
    """The verdict of a change's interval [low, high] against a tolerance (≥ 0) on the bad side."""
    worse_low, worse_high = sorted((low, high) if worse_up else (-high, -low))
    if worse_low > tolerance:
        return GateOutcome.REGRESSION
    if worse_high < -tolerance:
        return GateOutcome.IMPROVEMENT
    if worse_high <= tolerance:
        return GateOutcome.PASS
    return GateOutcome.INCONCLUSIVE


def _change(base: np.ndarray | float, candidate: np.ndarray | float, relative: bool) -> np.ndarray:
    """candidate − base, or in % of base (0 → 0: no change; from 0 to more: infinite)."""
    b, c = np.asarray(base, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    if not relative:
        return c - b
    with np.errstate(divide="ignore", invalid="ignore"):
        change = 100 * (c - b) / np.abs(b)
    return np.where((b == 0) & (c == 0), 0.0, change)


def _judge_figure(
    spec: GateSpec,
    runs: tuple[GateRun, GateRun],
    values: tuple[_Values | None, _Values | None],
    run_reasons: list[str],
) -> GateFigure:
    """One figure's verdict; base and candidate in that order in `runs` and `values`."""
    blank = GateFigure(
        spec.figure.value, spec.text, None, None, None, None, None, spec.relative, GateOutcome.INCONCLUSIVE
    )
    base, candidate = values
    if base is None or candidate is None:
        return replace(blank, reason="a run has fewer than 2 measured valid intervals")
    shown = replace(blank, base=_finite(base.point), candidate=_finite(candidate.point))
    problem = _figure_problem(spec, runs, base, candidate)
    if problem:
        return replace(shown, reason=problem)
    low, high = bootstrap.percentile_interval(_change(base.resampled, candidate.resampled, spec.relative))
    change = float(_change(base.point, candidate.point, spec.relative))
    shown = replace(shown, change=_finite(change), low=_finite(low), high=_finite(high))
    outcome = outcome_of(low, high, spec.tolerance, worse_up=spec.figure.worse_up)
    if run_reasons:
        return replace(shown, reason=f"the runs are not comparable; the interval alone says {outcome.value}")
    return replace(shown, outcome=outcome)


def _figure_problem(spec: GateSpec, runs: tuple[GateRun, GateRun], base: _Values, candidate: _Values) -> str:
    """Why this figure cannot be judged though the runs can be compared; "" when it can."""
    if spec.figure.latency:
        empty = [r.run_id for r in runs if not r.intervals.ok.sum()]
        if empty:
            return f"run {', '.join(empty)} had no ok response: its latency is of nothing"
    if spec.relative and base.point == 0:
        return f"the base's {spec.figure.value} is 0: a change in % of it means nothing (give an absolute tolerance)"
    if np.isnan(base.resampled).any() or np.isnan(candidate.resampled).any():
        return "some resamples hold no response: too few responses to tell"
    return ""


def _finite(value: float) -> float | None:
    """JSON has no NaN or infinity: a value of nothing, or an infinite change, is None."""
    return value if np.isfinite(value) else None
