import random

import pytest

from loadfleet.controller.model.figures import PhaseTime, figures_of, latency_of
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.phases import Phase, Phases
from loadfleet.wire.stats import StatsRow


def test_latency_figures_in_ms_from_the_merged_histogram():
    row = StatsRow("t", "r", histogram=Histogram.of(us * 100 for us in range(1, 1001)))  # 0.1 .. 100 ms
    latency = latency_of(row)
    assert latency.p50_ms == pytest.approx(50, rel=1e-3)
    assert latency.p99_ms == pytest.approx(99, rel=1e-3)
    assert latency.max_ms == pytest.approx(100, rel=1e-3)
    assert latency.min_ms == pytest.approx(0.1, rel=1e-3)
    assert latency.mean_ms == pytest.approx(50.05, rel=1e-3)
    assert latency_of(StatsRow("t", "r")) is None  # the latency of nothing is not 0


def test_the_mean_weighs_every_response():
    rng = random.Random(3)
    values = [int(rng.lognormvariate(7, 1.0)) + 1 for _ in range(5000)]
    latency = latency_of(StatsRow("t", "r", histogram=Histogram.of(values)))
    assert latency.mean_ms * 1000 == pytest.approx(sum(values) / len(values), rel=1e-3)


def _phased_row() -> StatsRow:
    """4 responses of 1, 2, 3 and 4 ms latency; one opened a connection (400 µs) over TLS (1 ms)."""
    return StatsRow(
        "t",
        "r",
        requests=4,
        status=[0, 4, 0, 0, 0],
        histogram=Histogram.of([1000, 2000, 3000, 4000]),
        phases=Phases(
            connect=Phase(1, 400, 400),
            tls=Phase(1, 1000, 1000),
            waiting=Phase(4, 4000, 1600),
            receiving=Phase(4, 800, 300),
            waiting_histogram=Histogram.of([400, 800, 1200, 1600]),
            queueing=Phase(4, 600, 500),
        ),
    )


def test_phase_figures_are_exact_means_and_add_up_to_the_mean_latency():
    f = figures_of(_phased_row(), 1.0)
    p = f.phases
    assert p.responses == 4
    assert p.connect == PhaseTime(count=1, mean_ms=0.4, max_ms=0.4, per_response_ms=0.1)
    assert p.tls.per_response_ms == 0.25 and p.waiting.mean_ms == 1.0 and p.receiving.per_response_ms == 0.2
    assert p.waiting_p50_ms == pytest.approx(0.8, rel=1e-3) and p.waiting_p99_ms == pytest.approx(1.6, rel=1e-3)
    assert p.queueing == PhaseTime(count=4, mean_ms=0.15, max_ms=0.5, per_response_ms=0.15)
    in_phases = sum(t.per_response_ms for t in (p.queueing, p.connect, p.tls, p.waiting, p.receiving))
    assert in_phases + p.other_ms == pytest.approx(f.latency.mean_ms)
    assert p.other_ms == pytest.approx(2.5 - 1.7, rel=1e-2)


@pytest.mark.parametrize("phases", [None, Phases()], ids=["no driver measured", "nothing measured"])
def test_a_row_without_phases_has_no_phase_figures(phases):
    row = StatsRow("t", "r", requests=1, status=[0, 1, 0, 0, 0], histogram=Histogram.of([5]), phases=phases)
    assert figures_of(row, 1.0).phases is None
