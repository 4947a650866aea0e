"""Soak drift: how far each interval is from the run's first hour.

A soak test asks whether the system degrades over hours. Grafana's InfluxQL cannot divide
one time range's figures by another's, so the controller keeps the first hour of load (the
baseline: every interval with requests, merged exactly) and writes, with each interval, its
p99, error rate and throughput next to the baseline's. While the run is younger than an
hour, the baseline is all of it so far.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loadfleet.controller.model.codec import row_from_doc, row_to_doc
from loadfleet.controller.model.figures import figures_of
from loadfleet.controller.stream.contract import FinalInterval, StepEnd
from loadfleet.wire.stats import TOTAL, StatsRow

BASELINE_MS = 3_600_000


@dataclass(frozen=True)
class DriftPoint:
    interval_start_ms: int
    baseline_complete: bool  # the whole first hour is in the baseline
    rps: float
    base_rps: float
    error_pct: float
    base_error_pct: float
    p99_ms: float | None  # None: no response in the interval, so no latency
    base_p99_ms: float

    @property
    def rps_drift_pct(self) -> float:
        return _pct_change(self.rps, self.base_rps)

    @property
    def p99_drift_pct(self) -> float | None:
        return None if self.p99_ms is None else _pct_change(self.p99_ms, self.base_p99_ms)


def _pct_change(value: float, base: float) -> float:
    return (value / base - 1) * 100 if base else 0.0


class Drift:
    """Consumes the run's published intervals and emits each one's drift; holds one merged
    row for the baseline."""

    def __init__(
        self, interval_ms: int, baseline_ms: int = BASELINE_MS, emit: Callable[[DriftPoint], None] = lambda point: None
    ):
        self._emit = emit
        self._interval_s = interval_ms / 1000
        self._baseline_ms = baseline_ms
        self._baseline = StatsRow(TOTAL, TOTAL)
        self._baseline_intervals = 0
        self._first_ms: int | None = None
        self._base = figures_of(self._baseline, 0.0)

    def on_interval(self, interval: FinalInterval) -> None:
        point = self.observe(interval.start_ms, interval.total)
        if point:
            self._emit(point)

    def on_step_end(self, end: StepEnd) -> None:
        pass

    def on_run_end(self) -> None:
        pass

    def snapshot(self) -> dict[str, Any]:
        """JSON values to take the baseline over after a restart (journal.py)."""
        return {
            "baseline": row_to_doc(self._baseline),
            "intervals": self._baseline_intervals,
            "first_ms": self._first_ms,
        }

    def restore(self, doc: dict[str, Any]) -> None:
        self._baseline = row_from_doc(doc["baseline"])
        self._baseline_intervals, self._first_ms = doc["intervals"], doc["first_ms"]
        self._base = figures_of(self._baseline, self._baseline_intervals * self._interval_s)

    def observe(self, start_ms: int, total: StatsRow) -> DriftPoint | None:
        """The drift of a published cluster interval; None when no request was sent in it
        (between steps, say)."""
        if total.requests == 0:
            return None
        if self._first_ms is None:
            self._first_ms = start_ms
        complete = start_ms >= self._first_ms + self._baseline_ms
        if not complete:
            self._baseline.add(total)
            self._baseline_intervals += 1
            self._base = figures_of(self._baseline, self._baseline_intervals * self._interval_s)
        now, base = figures_of(total, self._interval_s), self._base
        return DriftPoint(
            interval_start_ms=start_ms,
            baseline_complete=complete,
            rps=now.rps,
            base_rps=base.rps,
            error_pct=now.error_pct,
            base_error_pct=base.error_pct,
            p99_ms=now.latency.p99_ms if now.latency else None,
            base_p99_ms=base.latency.p99_ms if base.latency else 0.0,
        )
