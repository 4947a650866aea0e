"""A run's course: which step runs next, which are skipped and why, when a knee is looked
for, and in what state the run and each step end. Pure: no clock, no I/O, no asyncio; the
run asks, journals what was decided and does it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from loadfleet.controller.analysis.progress import RunProgress
from loadfleet.controller.analysis.stops import Condition, StopReason
from loadfleet.controller.analysis.sweep import knee_search
from loadfleet.controller.fleet.jobs import JobState
from loadfleet.controller.model.runstate import RunState
from loadfleet.controller.model.stepresult import StepState
from loadfleet.controller.plan.steps import StepSpec
from loadfleet.controller.plan.sweep import Sweep


@dataclass(frozen=True)
class Turn:
    """What the run does next: run `spec`, or skip the steps named (with the stop reason
    that a knee gives, when it is the run's first)."""

    spec: StepSpec | None = None
    skipped: tuple[str, ...] = ()
    stop: StopReason | None = None


@dataclass(frozen=True)
class KneeFound:
    servers: int
    note: str  # the event's text


class Course:
    def __init__(self, specs: Sequence[StepSpec], sweep: Sweep | None, progress: RunProgress):
        self.specs = list(specs)
        self._sweep = sweep
        self._progress = progress

    def spec(self, name: str) -> StepSpec:
        return next(s for s in self.specs if s.name == name)

    def upcoming(self) -> list[StepSpec]:
        """The steps neither measured nor skipped, in the order they run."""
        done = {r.name for r in self._progress.results} | set(self._progress.skipped)
        return [s for s in self.specs if s.name not in done]

    def next(self, *, halted: bool, now_ms: int) -> Turn | None:
        """The next turn (None: the course is run). `halted`: the run was asked to stop or
        lost more than its loss policy allows; a stop condition other than the knee halts it
        too. Once halted, every step left is skipped at once; a step whose servers' knee is
        found is skipped when the sweep stops at the knee."""
        upcoming = self.upcoming()
        if not upcoming:
            return None
        progress = self._progress
        if halted or (progress.stop and progress.stop.condition is not Condition.KNEE):
            return self._skip(Turn(skipped=tuple(s.name for s in upcoming)))
        spec = upcoming[0]
        knee = progress.knees.get(spec.servers)
        if knee is not None and self._sweep and self._sweep.stop_at_knee:
            stop = None
            if progress.stop is None:
                stop = StopReason(Condition.KNEE, f"stop_at_knee: {knee.describe()}", knee.name, now_ms)
            return self._skip(Turn(skipped=(spec.name,), stop=stop))
        return Turn(spec=spec)

    def skip_all(self) -> Turn:
        """Every step left is skipped (a taken-over run that cannot go on)."""
        return self._skip(Turn(skipped=tuple(s.name for s in self.upcoming())))

    def _skip(self, turn: Turn) -> Turn:
        self._progress.skipped += turn.skipped
        if turn.stop is not None:
            self._progress.stop = turn.stop
        return turn

    def knee_after(self, spec: StepSpec, *, stopped: bool) -> KneeFound | None:
        """After a step ends: the knee of its servers' levels, once their last repetition
        (or a stopped step) is measured, over the steps whose generators kept up."""
        sweep = self._sweep
        if not sweep or (spec.repetition != sweep.repeat and not stopped) or spec.servers in self._progress.knees:
            return None
        found = knee_search(self._progress.results, spec.servers)
        if found.knee is None:
            return None
        self._progress.knees[spec.servers] = found.knee
        return KneeFound(spec.servers, found.note)


def step_state(*, interrupted: bool, stopped: bool, ended: Sequence[JobState]) -> StepState:
    """How a step ended: the controller died during it, it was stopped, no agent finished
    its share, or it finished."""
    if interrupted:
        return StepState.INTERRUPTED
    if stopped:
        return StepState.STOPPED
    if set(ended) <= {JobState.FAILED}:
        return StepState.FAILED
    return StepState.FINISHED


def final_state(
    *, abort: bool, stop_requested: bool, stop: StopReason | None, outcomes: dict[JobState, int]
) -> RunState:
    """How a run ended: failed when its losses aborted it or no job finished or was stopped;
    else stopped (by request or a stop condition) or finished."""
    if abort or not (outcomes.get(JobState.FINISHED) or outcomes.get(JobState.STOPPED)):
        return RunState.FAILED
    return RunState.STOPPED if stop_requested or stop else RunState.FINISHED
