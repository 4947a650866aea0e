import random

import pytest

from loadfleet.controller.figures import PERCENTILES, latency_of
from loadfleet.wire.stats import StatsRow, new_histogram


@pytest.mark.parametrize("seed, n, sigma", [(3, 5000, 1.5), (4, 1, 1.0), (5, 7, 0.2), (6, 20000, 3.0)])
def test_figures_equal_hdrh_own(seed, n, sigma):
    rng = random.Random(seed)
    row = StatsRow("t", "r")
    for _ in range(n):
        row.histogram.record_value(int(rng.lognormvariate(7, sigma)) + 1)
    h = row.histogram
    latency = latency_of(row)
    assert latency.mean_ms * 1000 == pytest.approx(h.get_mean_value(), rel=1e-12)
    assert latency.stddev_ms * 1000 == pytest.approx(h.get_stddev(), rel=1e-9, abs=1e-9)
    for name, p in PERCENTILES:
        assert getattr(latency, f"{name}_ms") * 1000 == pytest.approx(h.get_value_at_percentile(p), rel=1e-12), name
    assert latency.max_ms * 1000 == pytest.approx(h.get_max_value(), rel=1e-12)


def test_latency_percentiles_in_ms():
    row = StatsRow("t", "r")
    for us in range(1, 1001):
        row.histogram.record_value(us * 100)  # 0.1 .. 100 ms
    latency = latency_of(row)
    assert latency.p50_ms == pytest.approx(50, rel=1e-3)
    assert latency.p99_ms == pytest.approx(99, rel=1e-3)
    assert latency.max_ms == pytest.approx(100, rel=1e-3)
    assert new_histogram().get_total_count() == 0 and latency_of(StatsRow("t", "r")).p99_ms == 0
