"""Per-interval evidence: a run's cluster totals over time, kept beside its steps so that findings
about the course of a test (`t`, `first_error_s`, `concurrent_users`) can be evaluated.

    cluster_intervals.csv  the run directory's intervals.csv reduced to its cluster total rows
                           (scope `cluster`, target `*`, request `*`: one row per interval) and
                           the columns of `KEPT_COLUMNS`, plus `interval_ms` from the plan

Bounded: one row of about 65 bytes per interval of the run (a 5-minute run at 1 s intervals is
300 rows, about 20 KB), whatever the number of agents, targets and requests.

Time. `t` counts the seconds under load since the run's load started, in the paper's seconds.
Steps of a sweep do not follow each other at once: the controller sets the next step's start at
least a second ahead (an interval or two without load), so the run's wall clock would put a later
step's phase late. Step k of the run (0-based, in order) is placed at k x step_s, and an interval
in it at its seconds since the step's load started:

    t = (k x step_s + (interval_start_ms - load_start_ms[k]) / 1000) x paper_s_per_run_s

where load_start_ms[k] is the step's first measured interval (summary.json) less its warm-up
rounded up to whole intervals, and paper_s_per_run_s (cell.json) is the paper's phase over step_s
for a study that plays the paper's phases as steps (studies.py), else 1. A plan without a sweep is
one step from its first interval for the plan's duration_s. Each step's last interval is left out:
it also holds the drain after the load (a server's backlog answered at once, stopped users'
connections closing), as the controller leaves it out of the step's figures. Intervals outside
every step's load (none are written today) and those of a step that measured nothing (its start
is unknown) get no `t` and are not used.

A run's `first_error_s` is the `t` of its first interval with a failed request, and infinite when
no request failed: "errors appear at t" then fails, and "before the first error" is the whole run.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .evaluate import Grain, Observation

INTERVALS_FILE = "cluster_intervals.csv"
SOURCE_FILE = "intervals.csv"  # in the run directory; written by the controller (rundir.py)
PLAN_FILE = "plan.yaml"
CLUSTER_SCOPE = "cluster"
TOTAL = "*"  # target and request of the row that merges them all
DEFAULT_INTERVAL_MS = 1000  # a plan's `interval_ms` when it gives none (docs/plans.md)
USERS_COLUMN = "users"  # users in progress at the interval's end (docs/metrics.md); older runs have none
KEPT_COLUMNS = (
    "interval_start_ms",
    "requests",
    "ok",
    "failed",
    "rps",
    "mean_ms",
    "p99_ms",
    "active_conns",
    USERS_COLUMN,  # kept only when the run's intervals.csv has it
    "validity",
)
T_DIGITS = 6  # rounding of t, so that 12 * 12.5 s and 150 s select alike


@dataclass(frozen=True)
class IntervalRow:
    """One interval of a run's cluster totals."""

    start_ms: int
    interval_ms: int
    requests: int
    ok: int
    failed: int
    rps: float
    mean_ms: float | None  # None: no response carried a latency (an empty cell)
    p99_ms: float | None
    active_conns: int
    users: int | None  # None: the run's intervals.csv had no `users` column
    validity: str

    @property
    def seconds(self) -> float:
        return self.interval_ms / 1000


@dataclass(frozen=True)
class LoadWindow:
    """When one step of a run offered its load."""

    index: int  # the step's position in the run, from 0: the phase it plays
    load_start_ms: int
    load_end_ms: float  # inf: to the run's end (a plan without a sweep or a duration)


@dataclass(frozen=True)
class RunClock:
    """A run's intervals placed on the paper's time axis (the module's docstring says how)."""

    windows: tuple[LoadWindow, ...]
    step_s: float
    paper_s_per_run_s: float = 1.0
    interval_ms: int = DEFAULT_INTERVAL_MS

    def t(self, interval_start_ms: int) -> float | None:
        """The interval's t; None when it lies in no step's load. A step's last interval is in
        none: the engines report it once their requests in flight have ended, so it also holds
        the drain after the load (a burst of responses from a server's backlog, stopped users'
        connections closing), as the step's own figures leave it out."""
        for window in self.windows:
            if window.load_start_ms <= interval_start_ms and interval_start_ms + self.interval_ms < window.load_end_ms:
                run_s = window.index * self.step_s + (interval_start_ms - window.load_start_ms) / 1000
                return round(run_s * self.paper_s_per_run_s, T_DIGITS)
        return None


def read_plan(run_dir: Path) -> dict[str, Any]:
    """The run's plan.yaml as it ran; empty when there is none."""
    plan_path = Path(run_dir) / PLAN_FILE
    return (yaml.safe_load(plan_path.read_text()) if plan_path.exists() else None) or {}


def plan_interval_ms(plan: dict[str, Any]) -> int:
    return int(plan.get("interval_ms") or DEFAULT_INTERVAL_MS)


def run_clock(plan: dict[str, Any], steps: Sequence[dict], rows: Sequence[IntervalRow], scale: float) -> RunClock:
    """The clock of a run of `plan` (the plan as it ran), whose summary lists `steps` in order."""
    sweep = plan.get("sweep")
    interval_ms = plan_interval_ms(plan)
    if not sweep:  # one step, its load from the first interval for the plan's duration
        start_ms = rows[0].start_ms if rows else 0
        end_ms = start_ms + float(plan["duration_s"]) * 1000 if plan.get("duration_s") else math.inf
        return RunClock((LoadWindow(0, start_ms, end_ms),), 0.0, scale, interval_ms)
    step_ms = round(float(sweep["step_s"]) * 1000)
    warmup_ms = math.ceil(float(sweep.get("warmup_s") or 0) * 1000 / interval_ms) * interval_ms
    windows = tuple(
        LoadWindow(index, step["start_ms"] - warmup_ms, step["start_ms"] - warmup_ms + step_ms)
        for index, step in enumerate(steps)
        if step.get("start_ms")  # 0: the step measured nothing, its start is unknown
    )
    return RunClock(windows, step_ms / 1000, scale, interval_ms)


def cluster_total_rows(lines: Iterable[str]) -> tuple[list[str], list[dict]]:
    """The kept columns present in an intervals.csv, and its cluster total rows with them."""
    reader = csv.DictReader(lines)
    columns = [c for c in KEPT_COLUMNS if c in (reader.fieldnames or ())]
    rows = [
        {c: row[c] for c in columns}
        for row in reader
        if row.get("scope") == CLUSTER_SCOPE and row.get("target") == TOTAL and row.get("request") == TOTAL
    ]
    return columns, rows


def keep_cluster_intervals(run_dir: Path, target_dir: Path) -> Path | None:
    """Writes the run's cluster totals per interval to target_dir; None when the run has no
    intervals.csv. Reads the source a line at a time: it can be large, the result is not."""
    source = Path(run_dir) / SOURCE_FILE
    if not source.exists():
        return None
    interval_ms = plan_interval_ms(read_plan(run_dir))
    with source.open(newline="") as lines:
        columns, rows = cluster_total_rows(lines)
    target = Path(target_dir) / INTERVALS_FILE
    with target.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=["interval_ms", *columns], lineterminator="\n")
        writer.writeheader()
        writer.writerows({"interval_ms": interval_ms, **row} for row in rows)
    return target


def _row(record: dict) -> IntervalRow:
    users = record.get(USERS_COLUMN)
    return IntervalRow(
        start_ms=int(record["interval_start_ms"]),
        interval_ms=int(record["interval_ms"]),
        requests=int(record["requests"]),
        ok=int(record["ok"]),
        failed=int(record["failed"]),
        rps=float(record["rps"]),
        mean_ms=_latency(record["mean_ms"]),
        p99_ms=_latency(record["p99_ms"]),
        active_conns=int(record["active_conns"]),
        users=None if users in (None, "") else int(users),
        validity=record.get("validity", ""),
    )


def _latency(cell: str) -> float | None:
    """A latency cell: empty when no response was timed (the latency of nothing is no 0)."""
    return float(cell) if cell else None


def read_interval_rows(evidence_dir: Path) -> list[IntervalRow] | None:
    """A stored run's intervals in time order; None when it was stored without them. ValueError or
    KeyError when the file is malformed."""
    path = Path(evidence_dir) / INTERVALS_FILE
    if not path.exists():
        return None
    with path.open(newline="") as lines:
        return sorted((_row(record) for record in csv.DictReader(lines)), key=lambda r: r.start_ms)


def interval_figures(row: IntervalRow) -> dict[str, float]:
    """An interval's figures, named as the steps' are where they mean the same."""
    figures = {
        "ok_rps": row.ok / row.seconds,
        "achieved_rps": row.rps,
        "error_rps": row.failed / row.seconds,
        "error_pct": 100.0 * row.failed / row.requests if row.requests else 0.0,
        "concurrent_conns": float(row.active_conns),
    }
    if row.mean_ms is not None and row.p99_ms is not None and row.requests:  # no response: no latency
        figures.update(mean_ms=row.mean_ms, p99_ms=row.p99_ms)
    if row.users is not None:
        figures["concurrent_users"] = float(row.users)
    return figures


def placed_rows(rows: Sequence[IntervalRow], clock: RunClock) -> list[tuple[float, IntervalRow]]:
    """(t, row) of every interval the clock places, in order of t."""
    timed = ((clock.t(row.start_ms), row) for row in rows)
    return sorted(((t, row) for t, row in timed if t is not None), key=lambda pair: pair[0])


def first_error_s(placed: Sequence[tuple[float, IntervalRow]]) -> float:
    """t of the first interval with a failed request; infinite when none failed."""
    return next((t for t, row in placed if row.failed > 0), math.inf)


def time_observations(cell: dict, clock: RunClock, rows: Sequence[IntervalRow]) -> list[Observation]:
    """One observation per placed interval (the cell's variables and `t`) and one of the whole
    run (`first_error_s`); none for a run without placed intervals."""
    placed = placed_rows(rows, clock)
    if not placed:
        return []
    variables = dict(cell.get("vars", {}))
    pass_no, run_id = int(cell.get("pass", 1)), str(cell.get("run_id", ""))
    observations = [
        Observation({**variables, "t": t}, interval_figures(row), pass_no, run_id, grain=Grain.INTERVAL)
        for t, row in placed
    ]
    run = Observation(variables, {"first_error_s": first_error_s(placed)}, pass_no, run_id, grain=Grain.RUN)
    return [*observations, run]


def read_time_observations(evidence_dir: Path, cell: dict, summary: dict) -> list[Observation]:
    """The time observations of a stored run (empty when it was stored without its intervals)."""
    rows = read_interval_rows(evidence_dir)
    if not rows:
        return []
    scale = float(cell.get("paper_s_per_run_s") or 1.0)
    clock = run_clock(read_plan(evidence_dir), summary.get("steps", []), rows, scale)
    return time_observations(cell, clock, rows)
