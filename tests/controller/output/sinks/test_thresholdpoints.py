"""The `threshold` measurement at the run's end, and the thresholds' live events as `event`
points (what Grafana's dashboards annotate)."""

from __future__ import annotations

import pytest

from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.thresholdresult import Outcome, ThresholdResult
from loadfleet.controller.output.sinks.output import InfluxOutput
from loadfleet.controller.output.sinks.thresholdpoints import threshold_points

FAILED = ThresholdResult(
    "p99 latency < 250 ms", "p99 latency < 250 ms", "cluster", "step", 250, "ms", 312.4, Outcome.FAILED
)
NOTHING = ThresholdResult(
    "p99, account", "p99 latency < 9 ms", "request account", "window 30 s", 9.0, "ms", None, Outcome.INCONCLUSIVE
)


class Collect:
    def __init__(self):
        self.points = []

    def add(self, points) -> None:
        self.points += points


def test_a_point_per_threshold_tagged_by_name_scope_and_over():
    failed, nothing = threshold_points(run_id="r1", results=[FAILED, NOTHING], at_ms=5000)
    assert failed.measurement == "threshold" and failed.time_ms == 5000
    assert dict(failed.tags) == {"run": "r1", "name": "p99 latency < 250 ms", "scope": "cluster", "over": "step"}
    assert dict(failed.fields) == {
        "value": 312.4,
        "limit": 250.0,
        "passed": False,
        "outcome": "failed",
        "text": "p99 latency < 250 ms",
        "unit": "ms",
    }
    assert isinstance(dict(failed.fields)["limit"], float), "one field type across points (an int 250 would conflict)"
    assert "value" not in dict(nothing.fields), "the value of nothing is left out, not 0"
    assert dict(nothing.fields)["outcome"] == "inconclusive"
    assert nothing.line() == (
        "threshold,run=r1,name=p99\\,\\ account,scope=request\\ account,over=window\\ 30\\ s "
        'limit=9.0,passed=false,outcome="inconclusive",text="p99 latency < 9 ms",unit="ms" 5000'
    )
    assert threshold_points(run_id="r1", results=[], at_ms=0) == []


def test_the_output_writes_the_results_at_the_end():
    sink = Collect()
    InfluxOutput("r1", [sink]).on_thresholds((FAILED,), at_ms=9000)
    assert [(p.measurement, p.time_ms, dict(p.tags)["name"]) for p in sink.points] == [
        ("threshold", 9000, "p99 latency < 250 ms")
    ]


@pytest.mark.parametrize(
    "kind", [EventKind.THRESHOLD_FAILING, EventKind.THRESHOLD_RECOVERED, EventKind.THRESHOLD_ABORT]
)
def test_threshold_events_are_event_points_as_every_run_event(kind):
    sink = Collect()
    InfluxOutput("r1", [sink]).on_event(Event(kind, "p99 latency < 250 ms: 312.4 ms", at_ms=7000))
    [point] = sink.points
    assert point.measurement == "event" and dict(point.tags) == {"run": "r1", "kind": kind.value}
    assert dict(point.fields)["text"] == "p99 latency < 250 ms: 312.4 ms"
