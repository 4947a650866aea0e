"""Synthetic run directories for the regression gate's tests, written with the controller's own
writers (rundir.py for plan.yaml, intervals.csv and latency.hlog; steps.py and summary.py for
summary.json), so their format is the real one.

A run is one agent against a ~5 ms service: each interval's responses are 5 ms plus an
exponential tail (mean 0.5 ms), the interval's level drifting by a few percent, as a real
service's does from interval to interval (GC, caches)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import yaml

from loadfleet.controller.analysis.steps import StepMeter
from loadfleet.controller.analysis.summary import summarize
from loadfleet.controller.analysis.totals import RunTotals
from loadfleet.controller.model.stepresult import StepState
from loadfleet.controller.model.verdict import Reason, Signal, Validity, verdict_of
from loadfleet.controller.output import rundir
from loadfleet.controller.plan.steps import StepSpec
from loadfleet.wire.histogram import Histogram, bucket_index
from loadfleet.wire.stats import StatsRow
from support.streamdata import interval, window

START_MS = 1_800_000_000_000
TARGET = "http://127.0.0.2:8080"
PLAN = {
    "name": "gate",
    "duration_s": 60,
    "targets": [{"url": TARGET, "weight": 1}],
    "workload": {"requests": [{"name": "home", "path": "/"}, {"name": "login", "path": "/login"}]},
    "load": {"model": "closed", "clients": 8},
}


@dataclass(frozen=True)
class RunShape:
    """What a synthetic run measured."""

    intervals: int = 40
    warmup_intervals: int = 0  # left out of the measured step
    responses: int = 400  # per interval and request
    base_us: int = 5000
    extra_us: int = 0  # added to every response
    failed_every: int = 0  # one failed (5xx) response in so many (0: none)
    invalid: frozenset[int] = frozenset()  # intervals the generators invalidated
    state: str = "finished"
    plan: dict = field(default_factory=lambda: PLAN)
    seed: int = 1


def _histogram(latencies_us: np.ndarray) -> Histogram:
    indices = np.array([bucket_index(int(v)) for v in latencies_us], dtype=np.int64)
    unique, counts = np.unique(indices, return_counts=True)
    return Histogram(unique, counts.astype(np.int64))


def _row(request: str, latencies_us: np.ndarray, failed: int) -> StatsRow:
    n = len(latencies_us)
    return StatsRow(
        TARGET, request, requests=n, status=[0, n - failed, 0, 0, failed], histogram=_histogram(latencies_us)
    )


_INVALID = verdict_of((Reason(Signal.HOST_CPU, Validity.INVALID, "a1", "host CPU 100 %"),))


def write_run(run_dir: Path, shape: RunShape = RunShape()) -> Path:
    """A finished run of `shape` in `run_dir` (its name is the run id)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    rundir.write_plan(run_dir, yaml.safe_dump(shape.plan))
    writer, totals, meter = rundir.RunDirWriter(run_dir, [TARGET]), RunTotals(), StepMeter()
    step = window(start_ms=START_MS, seconds=shape.intervals, warmup_ms=1000 * shape.warmup_intervals)
    rng = np.random.default_rng(shape.seed)
    for i in range(shape.intervals):
        level = shape.base_us * (1 + 0.03 * rng.standard_normal())
        rows = []
        for request in ("home", "login"):
            latencies = level + rng.exponential(500, shape.responses) + shape.extra_us
            failed = shape.responses // shape.failed_every if shape.failed_every else 0
            rows.append(_row(request, latencies, failed))
        published = interval(step, START_MS + 1000 * i, a1=rows)
        if i in shape.invalid:
            published = replace(published, verdict=_INVALID)
        writer.on_interval(published)
        totals.on_interval(published)
        meter.on_interval(published)
    writer.close()
    result = meter.result(StepSpec("main", 1, 8, 1), step, StepState.FINISHED)
    summary = summarize(
        run_id=run_dir.name,
        plan_name=shape.plan.get("name", ""),
        state=shape.state,
        message="",
        run_dir=str(run_dir),
        started_ms=START_MS,
        totals=totals,
        agent_ids=["a1"],
        events=[],
        steps=(result,),
    )
    rundir.write_summary(run_dir, summary, report=False)
    return run_dir
