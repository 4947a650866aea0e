"""Figures people read (rates, error %, latency percentiles in ms) from a merged row.

Percentiles come from the row's merged histogram, so they are exact for any merge of
drivers, agents and intervals; so do the phases' means (exact sums over exact counts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadfleet.wire.histogram import summaries
from loadfleet.wire.phases import PHASE_NAMES, Phase, Phases
from loadfleet.wire.stats import StatsRow, error_kind_name

PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9))
# Percentiles of waiting (time to first byte) in the figures.
WAITING_PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0))


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
class PhaseTime:
    """One phase: over how many responses it was measured, its mean and largest value, and
    its share of a response's mean latency (its sum over every response, `per_response_ms`:
    connecting, measured for the responses that opened a connection, spread over all)."""

    count: int = 0
    mean_ms: float = 0.0
    max_ms: float = 0.0
    per_response_ms: float = 0.0


@dataclass(frozen=True)
class PhaseFigures:
    """Where the responses' time went (docs/metrics.md defines each phase). The per-response
    means of the four phases and `other_ms` (what no phase covers: waiting for a connection or
    a send slot, writing the request) add up to the mean latency."""

    responses: int
    connect: PhaseTime
    tls: PhaseTime
    waiting: PhaseTime
    receiving: PhaseTime
    other_ms: float
    waiting_p50_ms: float = 0.0
    waiting_p90_ms: float = 0.0
    waiting_p99_ms: float = 0.0


@dataclass(frozen=True)
class Figures:
    requests: int
    ok: int
    failed: int
    transport_errors: int
    error_pct: float
    # Attempts per second (a refused connect is one attempt) and successes per second: never
    # one number for both.
    rps: float
    ok_rps: float
    mb_per_s: float
    bytes_in: int
    # None when no response carried a latency (none came, or only transport errors): the
    # latency of nothing is not 0 (summary.json null, CSV empty, no InfluxDB field, `-`).
    latency: Latency | None
    # Some requests were counted without a latency (a Gatling simulation without the hook):
    # `latency` covers only the others.
    latency_missing: bool = False
    # None when the driver measured no phase (Gatling).
    phases: PhaseFigures | None = None


def latency_of(row: StatsRow) -> Latency | None:
    """The row's latency figures; None when its histogram is empty (no response measured)."""
    h = row.histogram
    if not h:
        return None
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


def latencies_of(rows: list[StatsRow]) -> list[Latency | None]:
    """latency_of for many rows at once (histogram.summaries): a fleet's rows of an interval
    cost one native pass over their buckets, not a dozen numpy calls each. None for a row
    without a histogram, as latency_of."""
    filled = [i for i, row in enumerate(rows) if row.histogram]
    s = summaries([rows[i].histogram for i in filled], (p for _, p in PERCENTILES))
    us = 1000.0
    out: list[Latency | None] = [None] * len(rows)
    columns = zip(
        filled, s.mean.tolist(), s.stddev.tolist(), s.min_value.tolist(), s.max_value.tolist(), s.percentiles.tolist()
    )
    for i, mean, stddev, low, high, at in columns:
        out[i] = Latency(
            mean_ms=mean / us,
            stddev_ms=stddev / us,
            min_ms=low / us,
            max_ms=high / us,
            **{f"{name}_ms": value / us for (name, _), value in zip(PERCENTILES, at)},
        )
    return out


def figures_of(row: StatsRow, seconds: float, latency: Latency | None = None) -> Figures:
    """The row's figures over `seconds`; `latency`: its latency figures, if known already
    (None: computed here, and None again for a row without a histogram)."""
    seconds = max(seconds, 1e-9)
    latency = latency if latency is not None else latency_of(row)
    return Figures(
        requests=row.requests,
        ok=row.ok,
        failed=row.failed,
        transport_errors=row.transport_errors,
        error_pct=100.0 * row.failed / row.requests if row.requests else 0.0,
        rps=row.requests / seconds,
        ok_rps=row.ok / seconds,
        mb_per_s=row.bytes_in / 1e6 / seconds,
        bytes_in=row.bytes_in,
        latency=latency,
        latency_missing=row.latency_missing,
        phases=phases_of(row.phases, latency.mean_ms if latency else 0.0),
    )


def phases_of(phases: Phases | None, mean_latency_ms: float) -> PhaseFigures | None:
    """The figures of a row's phases; `mean_latency_ms`: the mean latency of the same responses."""
    if phases is None or not phases.responses:
        return None
    responses = phases.responses

    def time_of(phase: Phase) -> PhaseTime:
        if not phase.count:
            return PhaseTime()
        return PhaseTime(
            count=phase.count,
            mean_ms=phase.sum_us / phase.count / 1000,
            max_ms=phase.max_us / 1000,
            per_response_ms=phase.sum_us / responses / 1000,
        )

    times = {name: time_of(getattr(phases, name)) for name in PHASE_NAMES}
    in_phases_ms = sum(t.per_response_ms for t in times.values())
    waiting_at = dict(
        zip(
            (name for name, _ in WAITING_PERCENTILES),
            phases.waiting_histogram.percentiles(p for _, p in WAITING_PERCENTILES),
        )
    )
    # Fields named after PHASE_NAMES and WAITING_PERCENTILES (Any: mypy cannot match names made at run time).
    named: dict[str, Any] = {**times, **{f"waiting_{name}_ms": us / 1000 for name, us in waiting_at.items()}}
    return PhaseFigures(
        responses=responses,
        **named,
        # the mean latency is a histogram's (bucket midpoints): never below 0 by rounding
        other_ms=max(0.0, mean_latency_ms - in_phases_ms) if mean_latency_ms else 0.0,
    )


def errors_by_name(row: StatsRow) -> dict[str, int]:
    return {error_kind_name(kind): count for kind, count in sorted(row.errors.items())}
