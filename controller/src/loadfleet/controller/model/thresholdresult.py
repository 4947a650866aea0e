"""What a run's thresholds found (plan/thresholds.py says what they limit), and the run's verdict:
the values written to summary.json's `thresholds` and `verdict`, read back by the CLI (exit code
4), the console, the report, JUnit and Markdown."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Outcome(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    # Not judged: more than a tenth of its intervals were left out as invalid (generator-bound).
    # (A scope that measured nothing fails, or passes with reason "no data" when its
    # `on_no_data` is pass.)
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class ThresholdResult:
    name: str
    text: str  # the limit in words: "p99 latency < 250 ms"
    scope: str  # cluster | target NAME | request NAME | scenario NAME[, target NAME | , request NAME]
    over: str  # run | step | window 30 s
    limit: float
    unit: str  # ms, %, /s or ""
    # The judged value: over the run; for `step`, the worst step's; for a window, the worst
    # window's. None when the scope measured nothing to judge (the latency of nothing).
    value: float | None
    outcome: Outcome
    failing_steps: tuple[str, ...] = ()
    first_failed_ms: int | None = None  # wall clock of the end of the first failing interval
    aborted: bool = False  # this threshold's `abort` ended the run
    excluded_intervals: int = 0  # intervals left out as invalid (generator-bound)
    reason: str = ""  # why, in words, when not passed ("no response to measure")

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASSED


@dataclass(frozen=True)
class RunVerdict:
    """The run's verdict: passed unless a threshold failed (or was inconclusive while the plan's
    verdict rules make that a failure); `reasons` name each failed threshold."""

    passed: bool = True
    reasons: tuple[str, ...] = ()
