"""Figures people read (rates, error %, latency percentiles in ms) from a merged row.

Percentiles come from the row's merged histogram, so they are exact for any merge of
drivers, agents and intervals; so do the phases' means (exact sums over exact counts) and
the checks' pass rates (exact counts).

What ok means (wire/stats.py): a response that failed a check is not ok, so `ok` is the
responses that passed every check, `failed` the transport errors plus the responses that
failed a check (`check_failed`), and `error_pct` counts both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from loadfleet.wire.checks import CheckCount, pass_pct
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
    means of the five phases and `other_ms` (what no phase covers: writing the request, an
    HTTP/2 handshake) add up to the mean latency."""

    responses: int
    connect: PhaseTime
    tls: PhaseTime
    waiting: PhaseTime
    receiving: PhaseTime
    other_ms: float
    waiting_p50_ms: float = 0.0
    waiting_p90_ms: float = 0.0
    waiting_p99_ms: float = 0.0
    # Waiting for a free worker, connection or HTTP/2 stream (a driver of before it: none).
    queueing: PhaseTime = PhaseTime()


@dataclass(frozen=True)
class CheckFigures:
    """One check (or extraction, "extract <variable>") over a span: the responses that passed
    and failed it, and its pass %, None when it judged no response (summary.json null)."""

    passed: int = 0
    failed: int = 0
    pass_pct: float | None = None

    @classmethod
    def of(cls, count: CheckCount) -> CheckFigures:
        return cls(count.passed, count.failed, count.pass_pct)


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
    # Responses that failed a check, each once (the implicit status check 200-399 included;
    # 4xx + 5xx for a driver that judges no checks): in `failed`, not in `ok`.
    check_failed: int = 0
    # Every declared check of the row together: passed per judged, in %; None when the row
    # has no declared check (the implicit status check alone is not counted per check).
    check_pass_pct: float | None = None
    # Per declared check and extraction, in the plan's order (at most 32 for a request's
    # row; a `*` row's merge the same names of its requests).
    checks: dict[str, CheckFigures] = field(default_factory=dict)
    # Users ended by a plan rule (on_fail or on_missing: stop), and sessions started again.
    users_stopped: int = 0
    sessions_restarted: int = 0
    # Redirect hops followed (plan `redirects`); the row's responses are the last hops'.
    redirects: int = 0


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
        check_failed=row.check_failed,
        check_pass_pct=checks_pass_pct(row.checks.values()),
        checks={name: CheckFigures.of(count) for name, count in row.checks.items()},
        users_stopped=row.users_stopped,
        sessions_restarted=row.sessions_restarted,
        redirects=row.redirects,
    )


def checks_pass_pct(counts: Iterable[CheckCount]) -> float | None:
    """Every check together: 100 * passed / judged over all of them; None when none judged."""
    passed = failed = 0
    for c in counts:
        passed += c.passed
        failed += c.failed
    return pass_pct(passed, failed)


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
    """Transport errors by kind, and `check`: the responses that failed a check (when any),
    so the counts add up to `failed` (but for a Gatling console's KO requests, which have no
    kind)."""
    errors = {error_kind_name(kind): count for kind, count in sorted(row.errors.items())}
    if row.check_failed:
        errors[CHECK_ERRORS] = row.check_failed
    return errors


# errors_by_name's key of the responses that failed a check (ErrorKind CHECK's name).
CHECK_ERRORS = "check"
