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

With two or more baseline runs of the plan (compare BASE... CANDIDATE), the base's figures
come from a two-level bootstrap (the baseline runs drawn with replacement, then blocks within
each: bootstrap.two_level_chunks) over their pooled intervals, and the candidate's resamples
carry a run offset drawn with the between-run spread the baselines show (baselines.py), which
its one run cannot show (docs/ci.md "Several baseline runs"). With one baseline the gate is as
it was, and its method says that between-run variance is not included.

Every figure is inconclusive, whatever its interval, when the runs cannot be compared: a run
not finished, fewer than MIN_INTERVALS usable intervals, more than MAX_INVALID_SHARE of its
measured intervals invalid, or plans that differ (unless allowed); a latency figure is when a
run had no ok response.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from loadfleet.controller.analysis import baselines, bootstrap
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
    runs: tuple[_Values, ...] = ()  # each baseline run's own, when the base is 2+ runs pooled


def judge(
    base: GateRun,
    candidate: GateRun,
    specs: Sequence[GateSpec],
    *,
    allow_plan_change: bool = False,
    resamples: int = bootstrap.RESAMPLES,
) -> GateReport:
    """The gate's report on `specs` (in their order) for these two runs."""
    return judge_runs([base], candidate, specs, allow_plan_change=allow_plan_change, resamples=resamples)


def judge_runs(
    bases: Sequence[GateRun],
    candidate: GateRun,
    specs: Sequence[GateSpec],
    *,
    allow_plan_change: bool = False,
    resamples: int = bootstrap.RESAMPLES,
) -> GateReport:
    """The gate's report on `specs` (in their order) for a candidate run against one or more
    baseline runs of its plan (base_run: their ids, comma-separated)."""
    if not bases:
        raise ValueError("the gate needs at least one baseline run")
    reasons = comparability_runs(bases, candidate, allow_plan_change=allow_plan_change)
    figures = sorted({s.figure for s in specs}, key=list(GatedFigure).index)
    # One baseline: the seeds of the two-run gate (spawn's first children do not depend on how many).
    seeds = bootstrap.seed_of(*(b.run_id for b in bases), candidate.run_id).spawn(3)
    rngs = [np.random.default_rng(seed) for seed in seeds]
    if len(bases) == 1:
        base_values = _figures(bases[0], figures, rngs[0], resamples)
    else:
        base_values = _baseline_figures(bases, figures, rngs[0], resamples)
    candidate_values = _figures(candidate, figures, rngs[1], resamples)
    offsets = rngs[2].standard_normal(resamples)  # the candidate's run offsets, in units of τ
    runs = (*bases, candidate)
    judged = tuple(
        _judge_figure(spec, runs, (base_values.get(spec.figure), candidate_values.get(spec.figure)), reasons, offsets)
        for spec in specs
    )
    return GateReport(
        base_runs=tuple(b.run_id for b in bases),
        candidate_run=candidate.run_id,
        figures=judged,
        method=_method(bases, candidate, resamples),
        inconclusive_reasons=tuple(reasons),
    )


def comparability(base: GateRun, candidate: GateRun, *, allow_plan_change: bool = False) -> list[str]:
    """Why the two runs cannot be compared at all; [] when they can."""
    return comparability_runs([base], candidate, allow_plan_change=allow_plan_change)


def comparability_runs(bases: Sequence[GateRun], candidate: GateRun, *, allow_plan_change: bool = False) -> list[str]:
    """Why the runs cannot be compared at all, each named; [] when they can."""
    reasons = []
    base_role = "base" if len(bases) == 1 else "baseline"
    for role, run in (*((base_role, b) for b in bases), ("candidate", candidate)):
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
        reasons += [r for base in bases for r in _plan_reasons(base, candidate)]
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
    return [
        f"the plans differ in {shown} (runs {base.run_id} and {candidate.run_id}; --allow-plan-change accepts that)"
    ]


RECOMMENDED_BASELINES = 3  # fewer estimate the between-run spread from 1 degree of freedom, or none


def _method(bases: Sequence[GateRun], candidate: GateRun, resamples: int) -> str:
    nc = candidate.intervals.n
    tail = (
        f"candidate {nc} in blocks of {bootstrap.block_length(nc)}), "
        f"{resamples:,} resamples, {bootstrap.CONFIDENCE * 100:g} % percentile interval"
    )
    if len(bases) == 1:
        nb = bases[0].intervals.n
        return (
            f"1 baseline run: between-run variance not included (gate against {RECOMMENDED_BASELINES} or more "
            f"baseline runs to include it); moving-block bootstrap over measured valid intervals (base {nb} in "
            f"blocks of {bootstrap.block_length(nb)}, {tail}"
        )
    sizes = "+".join(str(b.intervals.n) for b in bases)
    advice = f" ({RECOMMENDED_BASELINES} or more recommended)" if len(bases) < RECOMMENDED_BASELINES else ""
    return (
        f"{len(bases)} baseline runs{advice}: between-run variance included; two-level bootstrap (baseline "
        f"runs drawn with replacement, then moving blocks within each) over measured valid intervals "
        f"(baselines {sizes}; the candidate given the baselines' between-run spread, {tail}"
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


def _baseline_figures(
    bases: Sequence[GateRun], figures: list[GatedFigure], rng: np.random.Generator, resamples: int
) -> dict[GatedFigure, _Values]:
    """Each figure over the baselines' usable intervals pooled and over two-level resamples of
    them, with each run's own (for the spread between runs); none when a run has fewer than 2."""
    if any(b.intervals.n < 2 for b in bases):
        return {}
    pooled = baselines.pool([b.intervals for b in bases])
    point = _weighted(pooled, np.ones((1, pooled.n)), figures)
    sizes = [b.intervals.n for b in bases]
    parts = [
        _weighted(pooled, w.astype(np.float64), figures) for w in bootstrap.two_level_chunks(rng, sizes, resamples)
    ]
    each = [_figures(b, figures, rng, resamples) for b in bases]
    return {
        f: _Values(float(point[f][0]), np.concatenate([p[f] for p in parts]), tuple(e[f] for e in each))
        for f in figures
    }


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
    runs: tuple[GateRun, ...],
    values: tuple[_Values | None, _Values | None],
    run_reasons: list[str],
    offsets: np.ndarray,
) -> GateFigure:
    """One figure's verdict; `runs` the baselines then the candidate, `values` the base's and the candidate's."""
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
    resampled = _with_run_spread(base, candidate, spec.relative, offsets)
    low, high = bootstrap.percentile_interval(_change(base.resampled, resampled, spec.relative))
    change = float(_change(base.point, candidate.point, spec.relative))
    shown = replace(shown, change=_finite(change), low=_finite(low), high=_finite(high))
    outcome = outcome_of(low, high, spec.tolerance, worse_up=spec.figure.worse_up)
    if run_reasons:
        return replace(shown, reason=f"the runs are not comparable; the interval alone says {outcome.value}")
    return replace(shown, outcome=outcome)


def _figure_problem(spec: GateSpec, runs: tuple[GateRun, ...], base: _Values, candidate: _Values) -> str:
    """Why this figure cannot be judged though the runs can be compared; "" when it can."""
    if spec.figure.latency:
        empty = [r.run_id for r in runs if not r.intervals.ok.sum()]
        if empty:
            return f"run {', '.join(empty)} had no ok response: its latency is of nothing"
    if spec.relative and base.point == 0:
        return f"the base's {spec.figure.value} is 0: a change in % of it means nothing (give an absolute tolerance)"
    if any(np.isnan(v.resampled).any() for v in (base, candidate, *base.runs)):
        return "some resamples hold no response: too few responses to tell"
    return ""


def _with_run_spread(base: _Values, candidate: _Values, relative: bool, offsets: np.ndarray) -> np.ndarray:
    """The candidate's resamples, each moved by a run offset τ·z (z standard normal, seeded):
    its one run shows its intervals' noise but not how far a run of the plan falls from
    another, which the baselines show (baselines.between_run_sd). τ in shares of the
    baselines' figure when the tolerance is relative (a run effect scales latency), else in
    its unit. One baseline: unchanged (nothing to estimate τ from)."""
    if not base.runs:
        return candidate.resampled
    scale = abs(base.point) if relative else 1.0  # relative: base.point ≠ 0 (_figure_problem)
    points = np.array([r.point for r in base.runs]) / scale
    tau = baselines.between_run_sd(points, [r.resampled / scale for r in base.runs])
    if relative:
        return candidate.resampled * (1 + tau * offsets)
    return candidate.resampled + tau * scale * offsets


def _finite(value: float) -> float | None:
    """JSON has no NaN or infinity: a value of nothing, or an infinite change, is None."""
    return value if np.isfinite(value) else None
