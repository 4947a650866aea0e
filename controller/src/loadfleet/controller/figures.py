"""Figures people read (rates, error %, latency percentiles in ms) from a merged row.

Percentiles come from the row's merged histogram, so they are exact for any merge of
drivers, agents and intervals.
"""
from __future__ import annotations

from dataclasses import dataclass

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
    if not h:
        return Latency()
    us = 1000.0
    mean, stddev = h.mean_and_stddev()
    at = h.percentiles(p for _, p in PERCENTILES)
    return Latency(
        mean_ms=mean / us,
        stddev_ms=stddev / us,
        min_ms=h.min_value / us,
        max_ms=h.max_value / us,
        **{f"{name}_ms": value / us for (name, _), value in zip(PERCENTILES, at)},
    )


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
