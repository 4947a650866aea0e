"""Run totals fold every published interval in: per (target, request), per agent, and the
seconds measured; what they hold does not grow with the number of intervals."""

from __future__ import annotations

import pytest

from loadfleet.controller.analysis.totals import RunTotals
from loadfleet.wire.histogram import Histogram
from support.streamdata import interval, row, window


def test_totals_by_target_request_and_agent_and_their_histograms():
    step = window(start_ms=10_000, seconds=3)
    totals = RunTotals()
    totals.on_interval(
        interval(
            step,
            10_000,
            a=[row(1, "t1", latencies=[100]), row(2, "t2", latencies=[200, 300])],
            b=[row(3, "t1", latencies=[400, 500, 600])],
        )
    )
    totals.on_interval(interval(step, 11_000, a=[row(4, "t1")]))
    assert totals.by_target()["t1"].requests == 8 and totals.by_target()["t2"].requests == 2
    assert totals.by_agent["b"].requests == 3 and totals.by_agent["a"].requests == 7
    total = totals.total()
    assert total.requests == 10 and total.histogram == Histogram.of([100, 200, 300, 400, 500, 600])
    assert totals.measured_s == pytest.approx(2.0)


def test_memory_is_per_key_and_agent_not_per_interval():
    step = window(start_ms=0, seconds=10_000)
    totals = RunTotals()
    for i in range(500):
        totals.on_interval(interval(step, 1000 * i, a=[row(5, latencies=[100 + i % 50])], b=[row(5)]))
    assert len(totals.by_key) == 1 and len(totals.by_agent) == 2 and len(totals.spans) == 1
    assert totals.total().requests == 5000 and totals.by_key[("", "http://t:1", "r")].histogram.buckets == 50


def test_a_snapshot_restores_the_same_totals():
    step = window(start_ms=10_000, seconds=3)
    totals = RunTotals()
    totals.on_interval(interval(step, 10_000, a=[row(1, latencies=[100])], b=[row(3, latencies=[400, 500, 600])]))
    back = RunTotals.restore(totals.snapshot())
    assert back.by_key == totals.by_key and back.by_agent == totals.by_agent
    assert back.measured_s == totals.measured_s
