"""The `http` point's phase fields: what was measured, and nothing else."""

from __future__ import annotations

import pytest

from loadfleet.controller.output.sinks.points import http_points
from loadfleet.controller.stream.contract import Scope
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.phases import Phase, Phases
from loadfleet.wire.stats import StatsRow


def _fields(phases: Phases | None) -> dict:
    row = StatsRow("t", "r", requests=2, status=[0, 2, 0, 0, 0], histogram=Histogram.of([900, 1100]), phases=phases)
    [point] = http_points(
        run_id="r", step="main", scope=Scope.CLUSTER, agent="", interval_start_ms=0, interval_ms=1000, rows=[row]
    )
    return dict(point.fields)


def test_measured_phases_write_count_exact_sum_mean_max_and_waiting_percentiles():
    fields = _fields(
        Phases(
            connect=Phase(1, 1234, 1234),
            waiting=Phase(2, 1001, 600),
            receiving=Phase(2, 40, 30),
            waiting_histogram=Histogram.of([401, 600]),
        )
    )
    assert (fields["connect_count"], fields["connect_sum_ms"], fields["connect_max_ms"]) == (1, 1.234, 1.234)
    assert fields["waiting_sum_ms"] == 1.001 and fields["waiting_mean_ms"] == pytest.approx(0.5005)
    assert fields["waiting_p99_ms"] == pytest.approx(0.6, rel=1e-3)
    assert not any(k.startswith("tls_") for k in fields), "plain http: no TLS fields"


@pytest.mark.parametrize("phases", [None, Phases()], ids=["no driver measured", "nothing measured"])
def test_no_phase_fields_without_phases(phases):
    assert not any(k.startswith(("connect_", "tls_", "waiting_", "receiving_")) for k in _fields(phases))
