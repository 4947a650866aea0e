"""A run's course without a run: which step comes next, what is skipped and why, when the
knee is looked for, and how steps and runs end (run/course.py; no asyncio, no clock)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from loadfleet.controller.analysis.progress import RunProgress
from loadfleet.controller.analysis.stops import Condition, StopReason
from loadfleet.controller.fleet.jobs import JobState
from loadfleet.controller.model.runstate import RunState
from loadfleet.controller.model.stepresult import StepResult, StepState
from loadfleet.controller.plan.steps import StepSpec
from loadfleet.controller.plan.sweep import Sweep
from loadfleet.controller.run.course import Course, final_state, step_state
from support.stepresults import step

SWEEP = Sweep(levels=(100, 200, 400, 800, 1600), step_s=10)
SPECS = [StepSpec(f"s{i}", i, level, 1) for i, level in enumerate(SWEEP.levels, start=1)]
# Throughput that grows until s3, then stays flat while p99 grows fourfold: the knee is at s4.
CURVE = {"s1": (100, 5.0), "s2": (200, 5.5), "s3": (300, 6.0), "s4": (305, 25.0), "s5": (306, 80.0)}


def result(spec: StepSpec) -> StepResult:
    ok_rps, p99 = CURVE[spec.name]
    return step(spec.name, spec.level, ok_rps, p99, servers=spec.servers, rep=spec.repetition)


def run_course(course: Course, progress: RunProgress, *, halt_after: str = "") -> list[str]:
    """Plays the course as a run does: each step's result, then the knee looked for."""
    ran = []
    halted = False
    while turn := course.next(halted=halted, now_ms=1000):
        if turn.spec:
            ran.append(turn.spec.name)
            progress.results.append(result(turn.spec))
            course.knee_after(turn.spec, stopped=False)
            halted = turn.spec.name == halt_after
    return ran


def test_the_steps_run_in_order_and_the_course_ends():
    progress = RunProgress()
    assert run_course(Course(SPECS, SWEEP, progress), progress) == ["s1", "s2", "s3", "s4", "s5"]
    assert progress.skipped == [] and progress.stop is None


def test_a_halted_run_skips_every_step_left_at_once():
    progress = RunProgress()
    course = Course(SPECS, SWEEP, progress)
    assert run_course(course, progress, halt_after="s2") == ["s1", "s2"]
    assert progress.skipped == ["s3", "s4", "s5"]
    assert course.next(halted=False, now_ms=0) is None, "nothing is left to run or skip"


def test_a_stop_condition_skips_the_rest_and_a_knee_does_not():
    progress = RunProgress(stop=StopReason(Condition.ERROR_PCT, "errors 12 % > 5 %", "s1"))
    progress.results.append(result(SPECS[0]))
    turn = Course(SPECS, SWEEP, progress).next(halted=False, now_ms=0)
    assert turn is not None and turn.spec is None and turn.skipped == ("s2", "s3", "s4", "s5")

    progress = RunProgress(stop=StopReason(Condition.KNEE, "stop_at_knee", "s3"))
    turn = Course(SPECS, SWEEP, progress).next(halted=False, now_ms=0)
    assert turn is not None and turn.spec == SPECS[0], "a knee stops only its servers' steps"


def test_stop_at_knee_skips_the_levels_past_it_with_one_stop_reason():
    progress = RunProgress()
    course = Course(SPECS, replace(SWEEP, stop_at_knee=True), progress)
    ran, turns = [], []
    while turn := course.next(halted=False, now_ms=1234):
        turns.append(turn)
        if turn.spec:
            ran.append(turn.spec.name)
            progress.results.append(result(turn.spec))
            course.knee_after(turn.spec, stopped=False)
    assert ran == ["s1", "s2", "s3", "s4"]
    assert progress.knees[1].name == "s4"
    assert progress.skipped == ["s5"]
    assert progress.stop is not None and progress.stop.condition is Condition.KNEE
    assert progress.stop.step == "s4" and progress.stop.at_ms == 1234
    assert [t.stop for t in turns if t.skipped] == [progress.stop]


def test_the_knee_is_looked_for_after_a_level_s_last_repetition_once():
    sweep = replace(SWEEP, repeat=2)
    specs = [StepSpec("s1", 1, 100, 1), StepSpec("s1r2", 1, 100, 1, 2)]
    progress = RunProgress(results=[result(s) for s in SPECS])
    course = Course(specs, sweep, progress)
    assert course.knee_after(specs[0], stopped=False) is None, "a repetition is still to come"
    found = course.knee_after(specs[0], stopped=True)
    assert found is not None and found.servers == 1 and found.note.startswith("knee at s4")
    assert course.knee_after(specs[1], stopped=False) is None, "found once per number of servers"
    assert Course(specs, None, RunProgress(results=progress.results)).knee_after(specs[1], stopped=False) is None


def test_a_taken_over_run_goes_on_with_the_steps_neither_measured_nor_skipped():
    progress = RunProgress(results=[result(SPECS[0])], skipped=["s2"])
    course = Course(SPECS, SWEEP, progress)
    assert [s.name for s in course.upcoming()] == ["s3", "s4", "s5"]
    assert course.skip_all().skipped == ("s3", "s4", "s5")
    assert progress.skipped == ["s2", "s3", "s4", "s5"] and course.upcoming() == []


@pytest.mark.parametrize(
    ("interrupted", "stopped", "ended", "state"),
    [
        (True, True, [JobState.FINISHED], StepState.INTERRUPTED),
        (False, True, [JobState.FAILED], StepState.STOPPED),
        (False, False, [JobState.FAILED, JobState.FAILED], StepState.FAILED),
        (False, False, [], StepState.FAILED),
        (False, False, [JobState.FAILED, JobState.FINISHED], StepState.FINISHED),
    ],
)
def test_how_a_step_ended(interrupted, stopped, ended, state):
    assert step_state(interrupted=interrupted, stopped=stopped, ended=ended) is state


@pytest.mark.parametrize(
    ("abort", "requested", "stop", "outcomes", "state"),
    [
        (False, False, None, {JobState.FINISHED: 2}, RunState.FINISHED),
        (True, False, None, {JobState.FINISHED: 2}, RunState.FAILED),
        (False, False, None, {JobState.FAILED: 2}, RunState.FAILED),
        (False, True, None, {JobState.STOPPED: 1}, RunState.STOPPED),
        (False, False, StopReason(Condition.KNEE, "knee"), {JobState.FINISHED: 1}, RunState.STOPPED),
    ],
)
def test_how_a_run_ended(abort, requested, stop, outcomes, state):
    assert final_state(abort=abort, stop_requested=requested, stop=stop, outcomes=outcomes) is state
