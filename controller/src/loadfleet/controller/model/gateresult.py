"""What `loadfleet compare BASE CANDIDATE --gate ...` decides (analysis/gate.py decides it): for
each gated figure the change, its confidence interval, and a verdict; the exit code follows."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from loadfleet.controller.model.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_THRESHOLD_FAILED


class GateOutcome(enum.StrEnum):
    PASS = "pass"  # the change's interval lies inside the tolerance on its bad side
    REGRESSION = "regression"  # the whole interval lies beyond the tolerance on the bad side
    IMPROVEMENT = "improvement"  # the whole interval lies beyond the tolerance on the good side
    INCONCLUSIVE = "inconclusive"  # the data cannot tell (too noisy, too few or invalid intervals)


@dataclass(frozen=True)
class GateFigure:
    """One gated figure: `figure` (e.g. `p99_ms`), the tolerance as written (`+10%`), both runs'
    values, the change (candidate − base; relative in % when the tolerance is) and its
    confidence interval; None where a run measured nothing to compare."""

    figure: str
    tolerance: str
    base: float | None
    candidate: float | None
    change: float | None
    low: float | None
    high: float | None
    relative: bool
    outcome: GateOutcome
    reason: str = ""  # why inconclusive, in words


@dataclass(frozen=True)
class GateReport:
    base_runs: tuple[str, ...]  # the baseline runs' ids, oldest first (one: the two-run gate)
    candidate_run: str
    figures: tuple[GateFigure, ...]
    method: str  # the statistics in words: "moving-block bootstrap, 2,000 resamples, 95 % interval"
    # Why no figure could be judged at all (a run not finished, plans differ, too few intervals).
    inconclusive_reasons: tuple[str, ...] = ()

    @property
    def base_run(self) -> str:
        """The baselines' ids in one line, as every output names them."""
        return ", ".join(self.base_runs)

    @property
    def baselines(self) -> int:
        return len(self.base_runs)

    @property
    def exit_code(self) -> int:
        """0 every figure passed or improved; 4 any regression; 5 inconclusive and no regression."""
        outcomes = {f.outcome for f in self.figures}
        if GateOutcome.REGRESSION in outcomes:
            return EXIT_THRESHOLD_FAILED
        if self.inconclusive_reasons or GateOutcome.INCONCLUSIVE in outcomes:
            return EXIT_INCONCLUSIVE
        return EXIT_OK
