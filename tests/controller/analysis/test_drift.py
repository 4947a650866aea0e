"""Soak drift: each interval against the run's first hour (here: its first 3 intervals)."""

from __future__ import annotations

import pytest

from loadfleet.controller.analysis.drift import Drift
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow


def interval(requests: int, latency_ms: float, errors: int = 0) -> StatsRow:
    row = StatsRow("*", "*")
    row.requests = requests
    row.status = [0, requests - errors, 0, 0, errors]
    row.histogram = (
        Histogram.of([int(latency_ms * 1000)], count=requests - errors) if requests > errors else row.histogram
    )
    return row


def test_the_baseline_grows_for_its_window_then_stays():
    drift = Drift(interval_ms=1000, baseline_ms=3000)
    first = drift.observe(0, interval(100, 10))
    assert first.p99_drift_pct == pytest.approx(0, abs=0.1) and first.rps_drift_pct == 0
    drift.observe(1000, interval(100, 10))
    third = drift.observe(2000, interval(100, 20))  # still in the baseline: it moves the baseline
    assert not third.baseline_complete and third.base_p99_ms == pytest.approx(20, rel=0.01)
    fourth = drift.observe(3000, interval(200, 40, errors=20))
    assert fourth.baseline_complete
    assert fourth.base_p99_ms == pytest.approx(20, rel=0.01)  # the p99 of the 300 baseline requests
    assert fourth.p99_drift_pct == pytest.approx(100, rel=0.02)
    assert fourth.rps_drift_pct == pytest.approx(100)
    assert (fourth.error_pct, fourth.base_error_pct) == (10.0, 0.0)


def test_idle_intervals_and_intervals_without_responses():
    drift = Drift(interval_ms=1000, baseline_ms=3000)
    assert drift.observe(0, interval(0, 0)) is None  # between steps: not the start of the baseline
    drift.observe(5000, interval(10, 5))
    failed = drift.observe(6000, interval(10, 5, errors=10))
    assert failed.p99_ms is None and failed.p99_drift_pct is None
    assert drift.observe(8000, interval(10, 5)).baseline_complete  # 3 s after the first load
