"""Controller values -> the messages of RunService (runs, agents, interval updates, events,
summaries, a plan's problems): what operators' CLIs read. convert.py is the agents' side.

What goes out cannot fail on a figure that grew too large: counts saturate at their field's
range (`_u64`)."""

from __future__ import annotations

import json
from typing import Any

from loadfleet.controller.analysis.summary import NamedFigures, RunSummary
from loadfleet.controller.fleet.agents import AgentRecord, AgentState
from loadfleet.controller.model.errors import Problem
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.figures import Figures, Latency
from loadfleet.controller.model.verdict import Validity
from loadfleet.controller.output.watchers import IntervalUpdate
from loadfleet.controller.rpc.convert import health_to_proto
from loadfleet.controller.run.run import Run, RunState
from loadfleet.controller.service.endedrun import EndedRun
from loadfleet.v1 import run_pb2


def problems_to_proto(problems: list[Problem]) -> run_pb2.PlanProblems:
    return run_pb2.PlanProblems(problems=[run_pb2.PlanProblem(path=p.path, message=p.message) for p in problems])


_EVENT_KINDS = {
    EventKind.RUN_STARTED: run_pb2.EVENT_KIND_RUN_STARTED,
    EventKind.RUN_FINISHED: run_pb2.EVENT_KIND_RUN_FINISHED,
    EventKind.RUN_STOPPED: run_pb2.EVENT_KIND_RUN_STOPPED,
    EventKind.AGENT_JOINED: run_pb2.EVENT_KIND_AGENT_JOINED,
    EventKind.AGENT_LOST: run_pb2.EVENT_KIND_AGENT_LOST,
    EventKind.JOB_FAILED: run_pb2.EVENT_KIND_JOB_FAILED,
    EventKind.STEP_STARTED: run_pb2.EVENT_KIND_STEP_STARTED,
    EventKind.STEP_FINISHED: run_pb2.EVENT_KIND_STEP_FINISHED,
    EventKind.KNEE: run_pb2.EVENT_KIND_KNEE,
    EventKind.STOP_CONDITION: run_pb2.EVENT_KIND_STOP_CONDITION,
    EventKind.GENERATOR_BOUND: run_pb2.EVENT_KIND_GENERATOR_BOUND,
    EventKind.TARGET_DOWN: run_pb2.EVENT_KIND_TARGET_DOWN,
    EventKind.TARGET_UP: run_pb2.EVENT_KIND_TARGET_UP,
    EventKind.LATE_REPORTS: run_pb2.EVENT_KIND_LATE_REPORTS,
    EventKind.RUN_RECOVERED: run_pb2.EVENT_KIND_RUN_RECOVERED,
    EventKind.DRIVER_READY: run_pb2.EVENT_KIND_DRIVER_READY,
    EventKind.AGENT_LATE: run_pb2.EVENT_KIND_AGENT_LATE,
    EventKind.AGENT_BACK: run_pb2.EVENT_KIND_AGENT_BACK,
    EventKind.LOSS_POLICY: run_pb2.EVENT_KIND_LOSS_POLICY,
    EventKind.ENGINE_FAILED: run_pb2.EVENT_KIND_ENGINE_FAILED,
    EventKind.CLOCK_OFFSET: run_pb2.EVENT_KIND_CLOCK_OFFSET,
    EventKind.SPOOL_DROPPED: run_pb2.EVENT_KIND_SPOOL_DROPPED,
    EventKind.DISK_FULL: run_pb2.EVENT_KIND_DISK_FULL,
    EventKind.CONTROLLER_STALLED: run_pb2.EVENT_KIND_CONTROLLER_STALLED,
    EventKind.THRESHOLD_FAILING: run_pb2.EVENT_KIND_THRESHOLD_FAILING,
    EventKind.THRESHOLD_RECOVERED: run_pb2.EVENT_KIND_THRESHOLD_RECOVERED,
    EventKind.THRESHOLD_ABORT: run_pb2.EVENT_KIND_THRESHOLD_ABORT,
    EventKind.TARGET_FAILED: run_pb2.EVENT_KIND_TARGET_FAILED,
    EventKind.SCENARIO_STARTED: run_pb2.EVENT_KIND_SCENARIO_STARTED,
    EventKind.SCENARIO_ENDED: run_pb2.EVENT_KIND_SCENARIO_ENDED,
}

_RUN_STATES = {
    RunState.STARTING: run_pb2.RUN_STATE_STARTING,
    RunState.RUNNING: run_pb2.RUN_STATE_RUNNING,
    RunState.FINISHED: run_pb2.RUN_STATE_FINISHED,
    RunState.STOPPED: run_pb2.RUN_STATE_STOPPED,
    RunState.FAILED: run_pb2.RUN_STATE_FAILED,
    RunState.INTERRUPTED: run_pb2.RUN_STATE_INTERRUPTED,
}

_AGENT_STATES = {
    AgentState.IDLE: run_pb2.AGENT_STATE_IDLE,
    AgentState.BUSY: run_pb2.AGENT_STATE_BUSY,
    AgentState.LOST: run_pb2.AGENT_STATE_LOST,
}


def event_to_proto(e: Event) -> run_pb2.RunEvent:
    return run_pb2.RunEvent(
        at_ms=e.at_ms, kind=_EVENT_KINDS[e.kind], agent_id=e.agent_id, text=e.text, scenario=e.scenario
    )


_UINT64_MAX = 2**64 - 1


def _u64(n: int) -> int:
    """A count for a uint64 field: saturated at its range, never an error. Counts are bounded
    where they enter (bounds.py); this keeps one run's impossible figure from failing every
    caller of ListRuns or WatchRun, whatever got past."""
    return min(max(n, 0), _UINT64_MAX)


def interval_to_proto(u: IntervalUpdate) -> run_pb2.IntervalSummary:
    f = u.figures
    return run_pb2.IntervalSummary(
        interval_start_ms=u.interval_start_ms,
        agents=u.agents,
        **_live_figures(f),
        mb_per_s=f.mb_per_s,
        missing_agents=u.missing,
        lost_agents=u.lost,
        validity=_VALIDITIES[u.verdict.validity],
        validity_reasons=u.verdict.reasons_text(),
        users=_u64(u.users),
        active_streams=_u64(u.active_streams),
        failing_thresholds=u.failing_thresholds,
        checks_passed=_u64(sum(c.passed for c in f.checks.values())),
        checks_failed=_u64(sum(c.failed for c in f.checks.values())),
        scenarios=[
            run_pb2.ScenarioFigures(name=s.name, **_live_figures(s.figures), users=_u64(s.users)) for s in u.scenarios
        ],
    )


def _live_figures(f: Figures) -> dict[str, Any]:
    """The figures the live line shows, of the interval or of one scenario in it: the latency of
    nothing is 0 with `latency_measured` false."""
    return {
        "requests": _u64(f.requests),
        "errors": _u64(f.failed),
        "rps": f.rps,
        "ok_rps": f.ok_rps,
        "p50_ms": f.latency.p50_ms if f.latency else 0.0,
        "p99_ms": f.latency.p99_ms if f.latency else 0.0,
        "latency_measured": f.latency is not None,
    }


_VALIDITIES = {
    Validity.VALID: run_pb2.VALIDITY_VALID,
    Validity.SUSPECT: run_pb2.VALIDITY_SUSPECT,
    Validity.INVALID: run_pb2.VALIDITY_INVALID,
}


def _latency_to_proto(lat: Latency | None) -> run_pb2.Latency | None:
    """None (the field left unset) when no response carried a latency."""
    return run_pb2.Latency(**vars(lat)) if lat is not None else None


def _totals_to_proto(n: NamedFigures) -> run_pb2.Totals:
    f: Figures = n.figures
    return run_pb2.Totals(
        name=n.name,
        requests=_u64(f.requests),
        ok=_u64(f.ok),
        errors=_u64(f.failed),
        rps=f.rps,
        mb_per_s=f.mb_per_s,
        error_pct=f.error_pct,
        latency=_latency_to_proto(f.latency),
    )


def summary_to_proto(s: RunSummary) -> run_pb2.RunSummary:
    return run_pb2.RunSummary(
        run_id=s.run_id,
        state=_RUN_STATES[RunState(s.state)],
        message=s.message,
        run_dir=s.run_dir,
        duration_s=s.duration_s,
        total=_totals_to_proto(s.total),
        targets=[_totals_to_proto(t) for t in s.targets],
        requests=[_totals_to_proto(r) for r in s.requests],
        agents=[_totals_to_proto(a) for a in s.agents],
        summary_json=json.dumps(s.to_json(), indent=2),
        scenarios=[_totals_to_proto(sc.total) for sc in s.scenarios],
    )


def agent_to_proto(r: AgentRecord) -> run_pb2.AgentInfo:
    i = r.identity
    return run_pb2.AgentInfo(
        agent_id=i.agent_id,
        hostname=i.hostname,
        cores=i.cores,
        version=i.version,
        labels=dict(i.labels),
        state=_AGENT_STATES[r.state],
        last_seen_ms=r.last_seen_ms,
        health=health_to_proto(r.health),
        monitors=i.monitor.describe() if i.monitor else "",
        allow_targets=list(i.allow_targets),
        clock_measured=r.clock is not None,
        clock_offset_ms=r.clock.offset_ms if r.clock else 0,
        clock_rtt_ms=r.clock.rtt_ms if r.clock else 0,
    )


def run_to_proto(run: Run | EndedRun) -> run_pb2.RunInfo:
    """A running `Run` or an `EndedRun`."""
    return run_pb2.RunInfo(
        run_id=run.run_id,
        plan_name=run.plan_name,
        state=_RUN_STATES[run.state],
        started_ms=run.started_ms,
        finished_ms=run.finished_ms,
        requests=_u64(run.total_requests),
        run_dir=str(run.run_dir),
    )


def update_to_proto(update: IntervalUpdate | Event | RunSummary) -> run_pb2.RunUpdate:
    if isinstance(update, IntervalUpdate):
        return run_pb2.RunUpdate(interval=interval_to_proto(update))
    if isinstance(update, Event):
        return run_pb2.RunUpdate(event=event_to_proto(update))
    return run_pb2.RunUpdate(finished=summary_to_proto(update))
