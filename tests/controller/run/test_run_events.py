"""A run's events: each one is its own InfluxDB point, even when two share a millisecond; a
threshold's abort is told by the threshold watch, not again as a stop condition."""

from __future__ import annotations

from loadfleet.controller.analysis.stops import Condition, StopReason
from loadfleet.controller.fleet.agents import AgentRegistry
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.run import announcements
from loadfleet.controller.run.run import Run
from support.streamdata import PLAN


class Points:
    def __init__(self):
        self.points = []

    def add(self, points):
        self.points += points


def test_events_of_one_kind_at_one_millisecond_become_separate_points(tmp_path):
    sink = Points()
    run = Run("r1", parse_plan(PLAN), tmp_path, AgentRegistry(), sinks=[sink])
    for agent in ("a1", "a2"):
        run._emit(Event(EventKind.AGENT_LOST, f"agent {agent} lost", agent, at_ms=5000))
    run._emit(Event(EventKind.TARGET_DOWN, "down", at_ms=5000))  # another kind keeps its time
    assert [(p.time_ms, dict(p.tags)["kind"]) for p in sink.points] == [
        (5000, "agent_lost"),
        (5001, "agent_lost"),
        (5000, "target_down"),
    ]


def test_a_threshold_s_abort_stops_the_run_told_once_by_the_threshold_watch(tmp_path):
    run = Run("r1", parse_plan(PLAN), tmp_path, AgentRegistry())
    run._on_stop_condition(StopReason(Condition.THRESHOLD, "threshold p99 latency < 1 ms failed: 3.0 ms", "main"))
    run._on_stop_condition(StopReason(Condition.ERROR_PCT, "error rate above 5 % for 2 s", "main"))  # same interval
    assert run.watchers.events == []  # THRESHOLD_ABORT is the watch's; the first stop wins
    assert run._progress.stop.condition is Condition.THRESHOLD
    other = Run("r2", parse_plan(PLAN), tmp_path / "r2", AgentRegistry())
    other._on_stop_condition(StopReason(Condition.ERROR_PCT, "error rate above 5 % for 2 s", "main"))
    assert [e.kind for e in other.watchers.events] == [EventKind.STOP_CONDITION]
    stop = StopReason(Condition.THRESHOLD, "threshold p99 latency < 1 ms failed: 3.0 ms", "main")
    message = announcements.closing_message("", failed=False, abort="", stop=stop, results=[])
    assert message == "stopped by a threshold's abort: threshold p99 latency < 1 ms failed: 3.0 ms"
