"""Figures people read (rates, error %, latency percentiles in ms) from a merged row.

Percentiles come from the row's merged histogram, so they are exact for any merge of
drivers, agents and intervals.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

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


def latency_of(row: StatsRow) -> Latency:
    h = row.histogram
    if h.get_total_count() == 0:
        return Latency()
    us = 1000.0
    mean, stddev = mean_and_stddev(h)
    percentiles = h.get_percentile_to_value_dict([p for _, p in PERCENTILES])
    return Latency(
        mean_ms=mean / us,
        stddev_ms=stddev / us,
        min_ms=h.get_min_value() / us,
        max_ms=h.get_max_value() / us,
        **{f"{name}_ms": percentiles[p] / us for name, p in PERCENTILES},
    )


def mean_and_stddev(h: HdrHistogram) -> tuple[float, float]:
    """The same figures as hdrh's get_mean_value() and get_stddev() (each bucket counts at
    its median equivalent value), from one walk over the non-empty buckets. hdrh's own
    versions step through every bucket in Python, ~100 ms for a histogram with a long
    tail, which stalled the controller's event loop under load."""
    counts = h.counts[:h.get_counts_array_index(h.get_max_value()) + 1]
    buckets = []
    for index, count in enumerate(counts):
        if count:
            low = h.get_lowest_equivalent_value(h.get_value_from_index(index))
            high = h.get_highest_equivalent_value(low)
            buckets.append((low + ((high - low + 1) >> 1), count))
    total = sum(count for _, count in buckets)
    mean = sum(value * count for value, count in buckets) / total
    variance = sum((value - mean) ** 2 * count for value, count in buckets) / total
    return mean, math.sqrt(variance)


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
    )


def errors_by_name(row: StatsRow) -> dict[str, int]:
    return {error_kind_name(kind): count for kind, count in sorted(row.errors.items())}
