"""Several baseline runs of one plan as the regression gate (gate.py) uses them: their intervals
pooled into one set, and the variance between runs that no one run's intervals show.

Two runs of the same plan on the same machine differ by more than their intervals vary within
each (the machine between runs: frequency, caches, placement, neighbours), which a block
bootstrap over one run's intervals cannot see. The model is Kalibera and Jones's ("Rigorous
benchmarking in reasonable time", ISMM 2013): a run's figure is μ + a + e, `a` the run's own
offset (variance τ², between runs), `e` its intervals' noise (variance v, within a run).
With m ≥ 2 baselines, τ² is estimated as they do, by the variance components of a one-way
random-effects model: the sample variance of the runs' figures less the mean of their
within-run variances (each from the run's own block bootstrap), 0 when negative.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loadfleet.controller.analysis.gaterun import Intervals

_ARRAYS = ("start_ms", "requests", "ok", "failed", "rps", "ok_rps", "responses", "latency_sum_ms", "max_ms")


def pool(runs: Sequence[Intervals]) -> Intervals:
    """The runs' intervals side by side (the first run's, then the second's ...), their
    histograms over the union of their buckets: what bootstrap.two_level_chunks' columns index."""
    arrays = {name: np.concatenate([getattr(r, name) for r in runs]) for name in _ARRAYS}
    if any(r.buckets is None or r.counts is None for r in runs):
        return Intervals(**arrays)
    buckets = np.unique(np.concatenate([r.buckets for r in runs if r.buckets is not None]))
    counts = np.zeros((sum(r.n for r in runs), len(buckets)), dtype=np.float64)
    row = 0
    for r in runs:
        assert r.buckets is not None and r.counts is not None
        counts[row : row + r.n, np.searchsorted(buckets, r.buckets)] = r.counts
        row += r.n
    return Intervals(**arrays, buckets=buckets, counts=counts)


def between_run_sd(points: np.ndarray, resampled: Sequence[np.ndarray]) -> float:
    """τ: the standard deviation between runs of a figure whose value in run r is points[r]
    and whose block-bootstrap values within run r are resampled[r] (all on one scale). NaN
    for fewer than 2 runs (nothing to estimate it from)."""
    if len(points) < 2:
        return float("nan")
    between = float(np.var(points, ddof=1))  # S²: estimates τ² + v (a run's figure holds both)
    within = float(np.mean([np.var(r) for r in resampled]))  # v: the mean within-run variance
    return float(np.sqrt(max(0.0, between - within)))
