"""Figures people read (rates, error %, latency percentiles in ms) from a merged row.

Percentiles come from the row's merged histogram, so they are exact for any merge of
drivers, agents and intervals.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from hdrh.histogram import HdrHistogram

from loadfleet.wire.stats import StatsRow, error_kind_name

PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9))


@dataclass(frozen=True)
class Latency:
    mean_ms: float = 0.0
    stddev_ms: float = 0.0
    min_ms: float = 0.0
    p50_ms: float = 0.0
    p90_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    p999_ms: float = 0.0
    max_ms: float = 0.0


@dataclass(frozen=True)
class Figures:
    requests: int
    ok: int
    failed: int
    transport_errors: int
    error_pct: float
    rps: float
    mb_per_s: float
    bytes_in: int
    latency: Latency
    # Some requests were counted without a latency (a Gatling simulation without the hook):
    # `latency` covers only the others.
    latency_missing: bool = False


def latency_of(row: StatsRow) -> Latency:
    h = row.histogram
    total = h.get_total_count()
    if total == 0:
        return Latency()
    us = 1000.0
    counts, (_, highest, median) = _counts_and_bucket_values(h)
    filled = np.flatnonzero(counts)
    n = counts[filled].astype(np.float64)
    values = median[filled]
    mean = float((n * values).sum() / total)
    stddev = math.sqrt(float((n * (values - mean) ** 2).sum() / total))
    cumulative = np.cumsum(counts[filled])
    at = {}
    for name, p in PERCENTILES:
        # hdrh's rule: the first bucket holding the ceil-ish p% count, reported at its top.
        target = max(1, int(p * total / 100 + 0.5))
        at[name] = float(highest[filled[np.searchsorted(cumulative, target)]])
    return Latency(
        mean_ms=mean / us,
        stddev_ms=stddev / us,
        min_ms=h.get_min_value() / us,
        max_ms=h.get_max_value() / us,
        **{f"{name}_ms": at[name] / us for name, _ in PERCENTILES},
    )


def _counts_and_bucket_values(h: HdrHistogram):
    """The histogram's counts (no copy) and, per counts index, the bucket's lowest, highest
    and median equivalent values. Doing this with arrays rather than hdrh's Python loops
    makes a row's figures ~100x cheaper: the controller computes them for every agent row
    of every interval, and at 50 agents x 80 rows hdrh's loops took 14 s of CPU per second."""
    shape = (h.counts_len, h.sub_bucket_half_count_magnitude, h.sub_bucket_half_count, h.unit_magnitude)
    return np.ctypeslib.as_array(h.counts)[:h.counts_len], _bucket_values(*shape)


@cache
def _bucket_values(counts_len: int, half_magnitude: int, half_count: int, unit_magnitude: int):
    index = np.arange(counts_len, dtype=np.int64)
    bucket = (index >> half_magnitude) - 1
    sub_bucket = (index & (half_count - 1)) + half_count
    first = bucket < 0
    sub_bucket[first] -= half_count
    bucket[first] = 0
    lowest = sub_bucket << (bucket + unit_magnitude)
    size = np.left_shift(1, unit_magnitude + bucket)
    return lowest, lowest + size - 1, (lowest + (size >> 1)).astype(np.float64)


def figures_of(row: StatsRow, seconds: float) -> Figures:
    seconds = max(seconds, 1e-9)
    return Figures(
        requests=row.requests,
        ok=row.ok,
        failed=row.failed,
        transport_errors=row.transport_errors,
        error_pct=100.0 * row.failed / row.requests if row.requests else 0.0,
        rps=row.requests / seconds,
        mb_per_s=row.bytes_in / 1e6 / seconds,
        bytes_in=row.bytes_in,
        latency=latency_of(row),
        latency_missing=row.latency_missing,
    )


def errors_by_name(row: StatsRow) -> dict[str, int]:
    return {error_kind_name(kind): count for kind, count in sorted(row.errors.items())}
