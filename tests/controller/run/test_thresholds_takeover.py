"""The thresholds of a run taken over after the controller's `kill -9`: the pipeline of a
restarted controller resumes from the run's journal (its checkpoint and the intervals logged
after it) to the same results and verdict as a controller that never died, without telling
the events of before again; live followers see which thresholds fail."""

from __future__ import annotations

import json

import pytest

from loadfleet.controller.analysis.summary import summarize
from loadfleet.controller.model.events import EventKind
from loadfleet.controller.model.summarydoc import SummaryDoc
from loadfleet.controller.model.thresholdresult import Outcome
from loadfleet.controller.output import rundir
from loadfleet.controller.output.watchers import IntervalUpdate
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.run.journal import CHECKPOINT_INTERVALS
from loadfleet.controller.run.pipeline import RunPipeline
from loadfleet.controller.run.recovery import recover
from support.streamdata import PLAN, closed, row, window

THRESHOLDS = """
thresholds:
  - {metric: latency, stat: p99, below_ms: 50}
  - {metric: ok_rps, above: 9, over: step, name: each step ok/s}
  - {metric: latency, stat: p99, below_ms: 50, over: {window_s: 5}, name: p99 over 5 s}
"""
ABORTING = """
thresholds:
  - {metric: latency, stat: p99, below_ms: 1, abort: {grace_s: 3}}
"""
STEPS = (window("s1", start_ms=0, seconds=40), window("s2", start_ms=40_000, seconds=40))


def pipeline(run_dir, stops, thresholds: str = THRESHOLDS) -> RunPipeline:
    return RunPipeline(
        "run-1", parse_plan(PLAN + thresholds), run_dir, heartbeat_ms=1000, sinks=[], on_stop=stops.append
    )


def intervals():
    """80 intervals over two steps: a slow spell in the first (2 of 10 responses at 90 ms for
    3 s: the windows holding it fail, the run so far fails for a while and then holds) and a
    quiet spell in the second (4 ok/s for 10 s: that step fails)."""
    for step in STEPS:
        for s in range(40):
            slow = 2 if step.name == "s1" and 10 <= s < 13 else 0
            n = 4 if step.name == "s2" and 20 <= s < 30 else 10
            latencies = [90_000] * slow + [5_000] * (n - slow)
            yield step, closed(step, step.load_start_ms + s * 1000, a=[row(n, latencies=latencies)])


def window_of(name):
    return next(s for s in STEPS if s.name == name)


@pytest.mark.parametrize("crash_after", [CHECKPOINT_INTERVALS + 7, 40 + CHECKPOINT_INTERVALS // 2, 12])
def test_a_run_taken_over_ends_with_the_thresholds_of_a_run_that_never_stopped(tmp_path, crash_after):
    whole = pipeline(tmp_path / "whole", [])
    whole.start(agents=["a"], hostnames=[], clock_offsets_ms={})
    for _, c in intervals():
        whole.publish(c, late={})

    first = pipeline(tmp_path / "cut", [])
    first.start(agents=["a"], hostnames=[], clock_offsets_ms={})
    published = list(intervals())
    for _, c in published[:crash_after]:
        first.publish(c, late={})
    # kill -9: the next controller takes the run over from its journal
    second = pipeline(tmp_path / "cut", [])
    second.resume(recover(tmp_path / "cut"), window_of)
    assert second.thresholds.results() == first.thresholds.results()
    for _, c in published[crash_after:]:
        second.publish(c, late={})

    assert second.thresholds.results() == whole.thresholds.results()
    assert second.thresholds.verdict() == whole.thresholds.verdict()
    run, steps, windows, some_ok = whole.thresholds.results()
    assert run.passed and steps.failing_steps == ("s2",) and windows.outcome is Outcome.FAILED and some_ok.passed
    told = [(e.kind, e.text) for e in second.watchers.events]
    assert told == [(e.kind, e.text) for e in whole.watchers.events], "nothing told twice, nothing left untold"
    assert len(told) >= 4


def test_followers_see_the_thresholds_failing_as_of_each_interval(tmp_path):
    p = pipeline(tmp_path, [])
    p.start(agents=["a"], hostnames=[], clock_offsets_ms={})
    follower = p.watchers.follow()
    for _, c in list(intervals())[:16]:
        p.publish(c, late={})
    updates = []
    while follower._items:
        item = follower._items.popleft()
        if isinstance(item, IntervalUpdate):
            updates.append(item.failing_thresholds)
    assert updates[9] == ()
    assert updates[10] == ("p99 latency < 50 ms", "p99 over 5 s")  # 2 of 110 responses slow so far
    kinds = [e.kind for e in p.watchers.events]
    assert kinds == [EventKind.THRESHOLD_FAILING, EventKind.THRESHOLD_FAILING]
    assert (
        p.watchers.events[1].text == "threshold p99 over 5 s (p99 latency < 50 ms) failing: 90.0 ms (last 5 s, cluster)"
    )


def test_an_abort_stops_the_run_through_the_stop_conditions_path(tmp_path):
    stops = []
    p = pipeline(tmp_path, stops, ABORTING)
    p.start(agents=["a"], hostnames=[], clock_offsets_ms={})
    for _, c in list(intervals())[:5]:
        p.publish(c, late={})
    (stop,) = stops
    assert stop.condition.value == "threshold" and stop.step == "s1"
    assert [e.kind for e in p.watchers.events] == [EventKind.THRESHOLD_FAILING, EventKind.THRESHOLD_ABORT]
    assert p.thresholds.results()[0].aborted


def test_summary_json_holds_the_results_in_plan_order_and_the_verdict(tmp_path):
    p = pipeline(tmp_path, [])
    p.start(agents=["a"], hostnames=[], clock_offsets_ms={})
    for _, c in intervals():
        p.publish(c, late={})
    results = p.thresholds.results()
    summary = summarize(
        run_id="run-1",
        plan_name="t",
        state="finished",
        message="",
        run_dir=str(tmp_path),
        started_ms=0,
        totals=p.totals,
        agent_ids=["a"],
        events=[],
        thresholds=results,
        verdict=p.thresholds.verdict(results),
    )
    assert rundir.write_summary(tmp_path, summary, report=False)
    doc = SummaryDoc.of(json.loads((tmp_path / "summary.json").read_text()))
    assert doc.thresholds == results
    names = ["p99 latency < 50 ms", "each step ok/s", "p99 over 5 s", "some response was ok"]
    assert [r.name for r in doc.thresholds] == names
    assert doc.verdict is not None and not doc.verdict.passed
    assert doc.verdict.reasons == (
        "each step ok/s (ok_rps > 9 /s) failed: 8.5 /s, in step(s) s2 (step, cluster)",
        "p99 over 5 s (p99 latency < 50 ms) failed: 90.0 ms, in step(s) s1 (window 5 s, cluster)",
    )


def test_a_checkpoint_without_thresholds_says_they_were_judged_since_the_restart_only(tmp_path):
    """A checkpoint written by a controller from before thresholds were judged."""
    first = pipeline(tmp_path, [])
    first.start(agents=["a"], hostnames=[], clock_offsets_ms={})
    published = list(intervals())
    for _, c in published[: CHECKPOINT_INTERVALS + 3]:
        first.publish(c, late={})
    path = tmp_path / "journal" / "checkpoint.json"
    checkpoint = json.loads(path.read_text())
    del checkpoint["thresholds"]
    path.write_text(json.dumps(checkpoint))
    second = pipeline(tmp_path, [])
    second.resume(recover(tmp_path), window_of)
    run = second.thresholds.results()[0]
    assert run.reason == "judged from the intervals since the controller's restart only"
    assert second.thresholds.measured_intervals == 3
