import random

import pytest

from loadfleet.controller.figures import PERCENTILES, latency_of, mean_and_stddev
from loadfleet.wire.stats import StatsRow, new_histogram


def test_fast_mean_and_stddev_equal_hdrh_own():
    rng = random.Random(3)
    histogram = new_histogram()
    for _ in range(5000):
        histogram.record_value(int(rng.lognormvariate(7, 1.5)) + 1)
    mean, stddev = mean_and_stddev(histogram)
    assert mean == pytest.approx(histogram.get_mean_value(), rel=1e-12)
    assert stddev == pytest.approx(histogram.get_stddev(), rel=1e-9)


def test_latency_percentiles_in_ms():
    row = StatsRow("t", "r")
    for us in range(1, 1001):
        row.histogram.record_value(us * 100)  # 0.1 .. 100 ms
    latency = latency_of(row)
    assert latency.p50_ms == pytest.approx(50, rel=1e-3)
    assert latency.p99_ms == pytest.approx(99, rel=1e-3)
    assert latency.max_ms == pytest.approx(100, rel=1e-3)
    assert [name for name, _ in PERCENTILES][-1] == "p999"
