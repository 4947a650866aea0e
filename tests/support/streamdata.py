"""Builders of stream values for the controller's unit tests."""

from __future__ import annotations

from collections.abc import Callable

from loadfleet.controller.fleet.jobs import JobReport
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.run.pipeline import RunPipeline
from loadfleet.controller.stream.contract import AgentRows, FinalInterval, StepWindow
from loadfleet.controller.stream.window import ClosedInterval, HeldReport
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow, total_row

JOB = "run-1"

# One target, one request: the smallest plan a pipeline can run.
PLAN = """
name: t
duration_s: 100
targets: [{url: "http://t:1"}]
workload: {requests: [{name: r, path: /}]}
load: {model: closed, clients: 1}
"""


def pipeline(run_dir, settle: Callable[[str, int], None] = lambda agent, seq: None) -> RunPipeline:
    """A run's pipeline for PLAN, writing to `run_dir`, without sinks."""
    return RunPipeline(
        "run-1", parse_plan(PLAN), run_dir, heartbeat_ms=1000, sinks=[], on_stop=lambda reason: None, settle=settle
    )


def window(name: str = "main", start_ms: int = 10_000, seconds: int = 10, **changes) -> StepWindow:
    fields = dict(
        name=name,
        index=0,
        job_id=JOB,
        interval_ms=1000,
        load_start_ms=start_ms,
        load_end_ms=start_ms + 1000 * seconds,
        load="10 clients",
    )
    return StepWindow(**{**fields, **changes})


def row(
    n: int,
    target: str = "http://t:1",
    request: str = "r",
    latencies=(),
    *,
    failed: int = 0,
    active: int = 0,
    opened: int = 0,
) -> StatsRow:
    return StatsRow(
        target,
        request,
        requests=n,
        status=[0, n - failed, 0, 0, failed],
        histogram=Histogram.of(latencies),
        active_connections=active,
        connections_opened=opened,
    )


def report(agent: str, start_ms: int, *rows: StatsRow, seq: int = 1, final: bool = False, job: str = JOB) -> JobReport:
    rows = rows or (row(1),)
    return JobReport(
        job_id=job,
        agent_id=agent,
        seq=seq,
        interval_start_ms=start_ms,
        rows=tuple(rows),
        total=total_row(rows),
        final=final,
    )


def closed(step: StepWindow, start_ms: int, **agents: list[StatsRow]) -> ClosedInterval:
    """A closed interval of `step` with each agent's rows (as message 1)."""
    return ClosedInterval(
        step, start_ms, {a: HeldReport(tuple(rows), total_row(rows), [1]) for a, rows in agents.items()}
    )


def interval(step: StepWindow, start_ms: int, **agents: list[StatsRow]) -> FinalInterval:
    """A published interval of `step` with each agent's rows."""
    return closed(step, start_ms, **agents).merged()


__all__ = ["PLAN", "AgentRows", "closed", "interval", "pipeline", "report", "row", "window"]
