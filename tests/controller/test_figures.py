import random

import pytest

from loadfleet.controller.figures import latency_of
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow


def test_latency_figures_in_ms_from_the_merged_histogram():
    row = StatsRow("t", "r", histogram=Histogram.of(us * 100 for us in range(1, 1001)))  # 0.1 .. 100 ms
    latency = latency_of(row)
    assert latency.p50_ms == pytest.approx(50, rel=1e-3)
    assert latency.p99_ms == pytest.approx(99, rel=1e-3)
    assert latency.max_ms == pytest.approx(100, rel=1e-3)
    assert latency.min_ms == pytest.approx(0.1, rel=1e-3)
    assert latency.mean_ms == pytest.approx(50.05, rel=1e-3)
    assert latency_of(StatsRow("t", "r")).p99_ms == 0


def test_the_mean_weighs_every_response():
    rng = random.Random(3)
    values = [int(rng.lognormvariate(7, 1.0)) + 1 for _ in range(5000)]
    latency = latency_of(StatsRow("t", "r", histogram=Histogram.of(values)))
    assert latency.mean_ms * 1000 == pytest.approx(sum(values) / len(values), rel=1e-3)
