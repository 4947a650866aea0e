"""Stop conditions: end a run early when the cluster's error rate or a latency
percentile (or the mean) stays above a threshold for a while.

`StopWatch` is fed each cluster interval once, in order (the merged `*`/`*` row, or for a
condition with a `scenario` that scenario's `*`/`*` row). An interval above a threshold
extends that condition's streak, one below it ends the streak, and an interval without
requests (for a scenario: without its rows) changes nothing. A condition triggers when its
streak covers at least `for_s` seconds; it ends the whole run.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from loadfleet.controller.plan.stops import StopConditions
from loadfleet.controller.stream.contract import FinalInterval, StepEnd
from loadfleet.wire.stats import StatsRow


class Condition(enum.StrEnum):
    ERROR_PCT = "error_pct"
    LATENCY = "latency"
    KNEE = "knee"  # the sweep's stop_at_knee
    THRESHOLD = "threshold"  # a failing threshold's `abort` (thresholds.py)


@dataclass(frozen=True)
class StopReason:
    condition: Condition
    text: str
    step: str = ""
    at_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"condition": self.condition.value, "text": self.text, "step": self.step, "at_ms": self.at_ms}


class StopWatch:
    """Consumes the run's published intervals: each step's measured cluster intervals go
    through the conditions (streaks start over with each step), and a condition met calls
    `on_stop` once."""

    def __init__(
        self,
        conditions: StopConditions | None,
        interval_ms: int,
        on_stop: Callable[[StopReason], None] = lambda reason: None,
    ):
        self._conditions = conditions or StopConditions()
        self._interval_s = interval_ms / 1000
        self._on_stop = on_stop
        self._step = ""
        self._stopped = False
        self._streak_s = {c: 0.0 for c in (Condition.ERROR_PCT, Condition.LATENCY)}
        self._worst = dict(self._streak_s)

    def on_interval(self, interval: FinalInterval) -> None:
        if interval.step.name != self._step:
            self._step = interval.step.name
            self.reset()
        if self._stopped or not interval.measured:
            return
        reason = self.observe_interval(interval)
        if reason:
            self._stopped = True
            self._on_stop(replace(reason, step=interval.step.name))

    def on_step_end(self, end: StepEnd) -> None:
        pass

    def on_run_end(self) -> None:
        pass

    def reset(self) -> None:
        """Forget streaks (a new step starts)."""
        for key in self._streak_s:
            self._streak_s[key] = 0.0
            self._worst[key] = 0.0

    def observe(self, total: StatsRow) -> StopReason | None:
        """One cluster interval's total, for every condition; the reason to stop, or None."""
        return self._observe(total, total)

    def observe_interval(self, interval: FinalInterval) -> StopReason | None:
        """One interval: each condition sees its scenario's total row, or the interval's."""
        c = self._conditions
        return self._observe(
            _watched(interval, c.error_pct.scenario if c.error_pct else ""),
            _watched(interval, c.latency.scenario if c.latency else ""),
        )

    def _observe(self, errors: StatsRow | None, latency: StatsRow | None) -> StopReason | None:
        c = self._conditions
        if c.error_pct and errors is not None and errors.requests:
            pct = 100.0 * errors.failed / errors.requests
            if self._extend(Condition.ERROR_PCT, pct, pct > c.error_pct.above_pct) >= c.error_pct.for_s:
                return StopReason(
                    Condition.ERROR_PCT,
                    f"{_whose(c.error_pct.scenario)}error rate above {c.error_pct.above_pct:g} % for "
                    f"{self._streak_s[Condition.ERROR_PCT]:g} s (up to {self._worst[Condition.ERROR_PCT]:.1f} %)",
                )
        if c.latency and latency is not None and latency.requests and latency.histogram:
            ms = c.latency.of(latency)
            if self._extend(Condition.LATENCY, ms, ms > c.latency.above_ms) >= c.latency.for_s:
                return StopReason(
                    Condition.LATENCY,
                    f"{_whose(c.latency.scenario)}{c.latency.label} latency above {c.latency.above_ms:g} ms "
                    f"for {self._streak_s[Condition.LATENCY]:g} s (up to {self._worst[Condition.LATENCY]:.0f} ms)",
                )
        return None

    def _extend(self, key: Condition, value: float, above: bool) -> float:
        if above:
            self._streak_s[key] += self._interval_s
            self._worst[key] = max(self._worst[key], value)
        else:
            self._streak_s[key] = 0.0
            self._worst[key] = 0.0
        return self._streak_s[key] if above else -1.0


def _watched(interval: FinalInterval, scenario: str) -> StatsRow | None:
    """The row a condition watches: the scenario's total (None when it has no rows in this
    interval), or the whole interval's."""
    return interval.scenario_total(scenario) if scenario else interval.total


def _whose(scenario: str) -> str:
    return f"scenario {scenario}: " if scenario else ""
