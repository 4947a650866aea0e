"""What `--gate FIGURE:TOLERANCE` asks the regression gate (analysis/gate.py) to judge.

The tolerance is the change allowed in the figure's bad direction: up for latency and the
error percentage, down for throughput. `p99_ms:+10%` allows p99 to grow by 10 % of the base's,
`error_pct:+0.5` by half a percentage point, `ok_rps:-5%` successes per second to fall by 5 %.
A sign against the bad direction (`p99_ms:-10%`) is refused: it would read as a demand for an
improvement, which the gate does not make; without a sign the bad direction is meant.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from loadfleet.controller.model.errors import UsageError


class GatedFigure(enum.StrEnum):
    """The figures a gate can judge, named as intervals.csv and `compare --json` name them."""

    P50_MS = "p50_ms"
    P90_MS = "p90_ms"
    P95_MS = "p95_ms"
    P99_MS = "p99_ms"
    P999_MS = "p999_ms"
    MEAN_MS = "mean_ms"
    MAX_MS = "max_ms"
    ERROR_PCT = "error_pct"
    RPS = "rps"  # attempts per second
    OK_RPS = "ok_rps"  # successes per second

    @property
    def percent(self) -> float | None:
        """The percentile a latency figure is (99.9 for p999_ms); None for the others."""
        return _PERCENTS.get(self)

    @property
    def latency(self) -> bool:
        return self in (*_PERCENTS, GatedFigure.MEAN_MS, GatedFigure.MAX_MS)

    @property
    def worse_up(self) -> bool:
        """Whether a higher value is worse (latency, errors) rather than better (throughput)."""
        return self not in (GatedFigure.RPS, GatedFigure.OK_RPS)


_PERCENTS = {
    GatedFigure.P50_MS: 50.0,
    GatedFigure.P90_MS: 90.0,
    GatedFigure.P95_MS: 95.0,
    GatedFigure.P99_MS: 99.0,
    GatedFigure.P999_MS: 99.9,
}
_ALIASES = {"p99.9_ms": GatedFigure.P999_MS}


@dataclass(frozen=True)
class GateSpec:
    """One `--gate`: the figure, the tolerance's size (≥ 0, in % of the base's value when
    `relative`, else in the figure's unit) and the tolerance as written."""

    figure: GatedFigure
    tolerance: float
    relative: bool
    text: str  # the tolerance as written: "+10%"

    @property
    def unit(self) -> str:
        return "%" if self.relative else ""


def parse_gate(value: str) -> GateSpec:
    """`FIGURE:TOLERANCE` (e.g. `p99_ms:+10%`); UsageError naming the value when it is not one."""
    name, sep, tolerance = value.partition(":")
    where = f"--gate {value}"
    figure = _ALIASES.get(name.strip()) or next((f for f in GatedFigure if f.value == name.strip()), None)
    if not sep or figure is None:
        names = ", ".join(f.value for f in GatedFigure)
        raise UsageError(f"{where}: expected FIGURE:TOLERANCE, e.g. p99_ms:+10%, with FIGURE one of {names}")
    text = tolerance.strip()
    relative = text.endswith("%")
    number = text.removesuffix("%").strip()
    try:
        size = float(number)
    except ValueError:
        raise UsageError(f"{where}: the tolerance {text!r} is not a number (e.g. +10% or +0.5)") from None
    if not math.isfinite(size):
        raise UsageError(f"{where}: the tolerance must be a finite number")
    bad_sign = "+" if figure.worse_up else "-"
    if number.startswith(("+", "-")) and not number.startswith(bad_sign) and size != 0:
        direction = "up" if figure.worse_up else "down"
        raise UsageError(
            f"{where}: a tolerance is the change allowed in the bad direction, which for {figure.value} "
            f"is {direction}: write {figure.value}:{bad_sign}{abs(size):g}{'%' if relative else ''}"
        )
    return GateSpec(figure, abs(size), relative, text)


def check_request_gates(specs: list[GateSpec], request: str) -> None:
    """UsageError for a percentile gated on one request: a run directory holds the latency
    histograms of the cluster only (latency.hlog), so a request's percentiles are not known."""
    percentiles = [s.figure.value for s in specs if s.figure.percent is not None]
    if percentiles:
        raise UsageError(
            f"--gate-request {request}: {', '.join(percentiles)} cannot be gated for one request (a run "
            "directory keeps the latency histograms of the whole cluster only); gate mean_ms, max_ms, "
            "error_pct, rps or ok_rps for it, or the percentiles without --gate-request"
        )
