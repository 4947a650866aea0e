"""Failures after a step's measured window, attributed to the step (issue 34).

A request still in flight when a step's window closes ends later: a response or a timeout (the
plan's `timeouts.request_ms`) in the next second, between steps or in the run's drain. The step's
own figures count only what ended inside the window, so a server that answers nothing until the
client gives up looks error-free. We attribute them from what a stored run kept:

- its intervals (`cluster_intervals.csv`): the failures of the intervals from the step's window
  end until the next step's load starts (the run's end for the last step) are the step's;
- otherwise its totals (summary.json `total.figures.failed` less the failures its steps' windows
  counted): what failed outside every window cannot be placed in time, so each step of the run is
  charged all of it, an upper bound (it includes warm-up failures). A run of one step is exact
  apart from its warm-up.

A step's `error_pct` then counts them: 100 × (failed in the window + after it) / (requests in the
window + failed after it); `window_error_pct` keeps loadfleet's own figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .intervals import IntervalRow, plan_interval_ms


class Source:
    INTERVALS = "intervals"
    TOTALS = "run totals (upper bound per step)"


@dataclass(frozen=True)
class Late:
    failed: float  # failures after the window attributed to the step
    source: str  # Source.*: how they were attributed


def window_failed(step: dict) -> float:
    """The failures a step's measured window counted."""
    return round(float(step.get("requests") or 0) * float(step.get("error_pct") or 0) / 100)


def from_totals(summary: dict) -> dict[str, Late]:
    """Each step's share of the run's failures outside every window: all of them (see above)."""
    steps = summary.get("steps") or []
    total = float(((summary.get("total") or {}).get("figures") or {}).get("failed") or 0)
    outside = max(0.0, total - sum(window_failed(s) for s in steps))
    return {str(s.get("name")): Late(outside, Source.TOTALS) for s in steps}


def from_intervals(summary: dict, plan: dict, rows: Sequence[IntervalRow]) -> dict[str, Late]:
    """Each step's failures in the intervals between its window's end and the next step's load."""
    steps = [s for s in summary.get("steps") or [] if s.get("start_ms")]
    interval_ms = plan_interval_ms(plan)
    warmup_ms = math.ceil(float((plan.get("sweep") or {}).get("warmup_s") or 0) * 1000 / interval_ms) * interval_ms
    late = {}
    for index, step in enumerate(steps):
        window_end = step["start_ms"] + 1000 * float(step.get("measured_s") or 0)
        next_load = steps[index + 1]["start_ms"] - warmup_ms if index + 1 < len(steps) else math.inf
        failed = sum(r.failed for r in rows if window_end <= r.start_ms < next_load)
        late[str(step.get("name"))] = Late(float(failed), Source.INTERVALS)
    return late


def late_failures(summary: dict, plan: dict, rows: Sequence[IntervalRow] | None) -> dict[str, Late]:
    """Per step name, its failures after the window (module docstring)."""
    return from_intervals(summary, plan, rows) if rows else from_totals(summary)


def strict_error_pct(step: dict, late: Late | None) -> float | None:
    """The step's error % with the failures after its window counted (module docstring)."""
    if step.get("error_pct") is None:
        return None
    if late is None or not late.failed:
        return float(step["error_pct"])
    requests = float(step.get("requests") or 0) + late.failed
    return 100.0 * (window_failed(step) + late.failed) / requests
