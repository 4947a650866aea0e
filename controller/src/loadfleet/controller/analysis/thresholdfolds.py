"""How one threshold folds the run's measured intervals (`over` in plan/thresholds.py): the
whole run into one tally, each step into its own, or a rolling window of the last
`window_s` seconds (a step at a time: a window never spans two steps' loads).

A fold is fed each measured, valid interval's tally of the threshold's scope (a scope within
one scenario: only the intervals in which that scenario has rows, so a window or step is the
scenario's own intervals, and a scenario that never ran leaves the fold unjudged); it says
whether the threshold fails now (live), and at the end its `Judged`: the worst value, whether
any step or window failed and which steps. State: O(1) tallies for `run`, O(1) plus a value
per step for `step`, and at most `MAX_WINDOW_INTERVALS` tallies for a window. A tally holds
its scope's check counts too (at most 32 names per request of the plan, wire/checks.py), so
a check_pass_pct threshold folds like any count: passed and failed added over the span (and
a window's oldest subtracted), the pass % taken of the sums, never a mean of percentages.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field
from typing import Any

from loadfleet.controller.analysis.thresholdvalues import Tally, fails, value_of, worse
from loadfleet.controller.plan.thresholds import MAX_WINDOW_INTERVALS, OverKind, Threshold

__all__ = ["MAX_WINDOW_INTERVALS", "Fold", "Judged", "StepFold", "WindowFold", "fold_for"]


@dataclass
class Judged:
    """What a fold found over the run: the worst value judged (None: none measured), whether
    something judged failed, and in which steps."""

    value: float | None = None
    judged: bool = False
    failed: bool = False
    failing_steps: list[str] = field(default_factory=list)

    def note(self, threshold: Threshold, step: str, value: float | None) -> None:
        self.value = worse(threshold, self.value, value) if self.judged else value
        self.judged = True
        if fails(threshold, value):
            self.failed = True
            if step not in self.failing_steps:
                self.failing_steps.append(step)

    def copy(self) -> Judged:
        return Judged(self.value, self.judged, self.failed, list(self.failing_steps))

    def to_doc(self) -> dict[str, Any]:
        return {"value": self.value, "judged": self.judged, "failed": self.failed, "steps": self.failing_steps}

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Judged:
        return cls(doc["value"], doc["judged"], doc["failed"], list(doc["steps"]))


class Fold:
    """Over the run: every measured interval in one tally."""

    def __init__(self, threshold: Threshold):
        self.threshold = threshold
        self.step = ""
        self.tally = Tally()

    def add(self, step: str, tally: Tally) -> bool | None:
        """One interval of `step`; whether the threshold fails now (None: nothing to judge yet)."""
        self.step = step
        self.tally.add(tally)
        return fails(self.threshold, value_of(self.threshold, self.tally))

    @property
    def live_value(self) -> float | None:
        return value_of(self.threshold, self.tally)

    def end_step(self) -> None:
        pass

    def judged(self) -> Judged:
        found = Judged()
        if self.tally.intervals:
            found.note(self.threshold, self.step, self.live_value)
        found.failing_steps = []  # over the run: no step is to blame
        return found

    def to_doc(self) -> dict[str, Any]:
        return {"step": self.step, "tally": self.tally.to_doc()}

    def restore(self, doc: dict[str, Any]) -> None:
        self.step = doc["step"]
        self.tally = Tally.from_doc(doc["tally"])


class StepFold(Fold):
    """Over each step: a tally per step, started over with each; a value kept per step."""

    def __init__(self, threshold: Threshold):
        super().__init__(threshold)
        self.done = Judged()

    def add(self, step: str, tally: Tally) -> bool | None:
        if step != self.step:
            self.end_step()
            self.step = step
        return super().add(step, tally)

    def end_step(self) -> None:
        if self.tally.intervals:
            self.done.note(self.threshold, self.step, self.live_value)
        self.tally = Tally()

    def judged(self) -> Judged:
        found = self.done.copy()
        if self.tally.intervals:  # the step of now, not ended (the run was cut short)
            found.note(self.threshold, self.step, self.live_value)
        return found

    def to_doc(self) -> dict[str, Any]:
        return {**super().to_doc(), "done": self.done.to_doc()}

    def restore(self, doc: dict[str, Any]) -> None:
        super().restore(doc)
        self.done = Judged.from_doc(doc["done"])


class WindowFold(Fold):
    """Over every rolling window of `window_s`: a ring of the last intervals' tallies and
    their running sum, the newest added and the oldest subtracted (exactly: histogram.py).
    Windows are judged once full; a step shorter than the window is judged whole at its end."""

    def __init__(self, threshold: Threshold, interval_ms: int):
        super().__init__(threshold)
        # At most MAX_WINDOW_INTERVALS (the plan refuses a longer window; 10 minutes of
        # one-second intervals): the ring is the watch's only state that is not O(1) per
        # threshold, and the checkpoint carries it.
        self.size = max(1, math.ceil(threshold.over.window_s * 1000 / interval_ms))
        if self.size > MAX_WINDOW_INTERVALS:
            raise ValueError(
                f"threshold {threshold.name!r}: a window of {threshold.over.window_s:g} s is {self.size} intervals "
                f"of {interval_ms} ms; at most {MAX_WINDOW_INTERVALS}"
            )
        self.ring: collections.deque[Tally] = collections.deque()
        self.done = Judged()
        self.judged_in_step = False

    def add(self, step: str, tally: Tally) -> bool | None:
        if step != self.step:
            self.end_step()
            self.step = step
        self.ring.append(tally)
        self.tally.add(tally)
        if len(self.ring) > self.size:
            self.tally.subtract(self.ring.popleft())
            self.tally.with_maxima(list(self.ring))
        if len(self.ring) < self.size:
            return None
        self.judged_in_step = True
        value = self.live_value
        self.done.note(self.threshold, step, value)
        return fails(self.threshold, value)

    def end_step(self) -> None:
        if self.ring and not self.judged_in_step:
            self.done.note(self.threshold, self.step, self.live_value)
        self.ring.clear()
        self.tally = Tally()
        self.judged_in_step = False

    def judged(self) -> Judged:
        found = self.done.copy()
        if self.ring and not self.judged_in_step:
            found.note(self.threshold, self.step, self.live_value)
        return found

    def to_doc(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "ring": [t.to_doc() for t in self.ring],
            "done": self.done.to_doc(),
            "judged_in_step": self.judged_in_step,
        }

    def restore(self, doc: dict[str, Any]) -> None:
        self.step = doc["step"]
        self.ring = collections.deque(Tally.from_doc(t) for t in doc["ring"])
        self.tally = Tally()
        for part in self.ring:
            self.tally.add(part)
        self.done = Judged.from_doc(doc["done"])
        self.judged_in_step = doc["judged_in_step"]


def fold_for(threshold: Threshold, interval_ms: int) -> Fold:
    if threshold.over.kind is OverKind.STEP:
        return StepFold(threshold)
    if threshold.over.kind is OverKind.WINDOW:
        return WindowFold(threshold, interval_ms)
    return Fold(threshold)
