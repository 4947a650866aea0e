"""What the controller asks of one agent, and what the agent says back about it."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from loadfleet.controller.fleet.scheduler import EngineShare
from loadfleet.controller.plan.model import Plan
from loadfleet.wire.stats import TOTAL, StatsRow


class JobState(enum.Enum):
    READY = "ready"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"

    @property
    def ended(self) -> bool:
        return self in (JobState.FINISHED, JobState.FAILED, JobState.STOPPED)


# A sweep's steps are jobs of their own: `<run id>/<step>`. A one-step run's job is the run.
_STEP_SEPARATOR = "/"


def job_id_for(run_id: str, step: str, *, single: bool) -> str:
    return run_id if single else f"{run_id}{_STEP_SEPARATOR}{step}"


def run_id_of(job_id: str) -> str:
    return job_id.split(_STEP_SEPARATOR, 1)[0]


@dataclass(frozen=True)
class JobAssignment:
    """One agent's share of a run: the plan, and the share of each engine to start."""

    job_id: str
    plan: Plan
    engines: tuple[EngineShare, ...]
    start_at_ms: int
    # A unique feed: the file's rows [start, end) this agent's engines hold (feedsplit.py).
    feed_rows: tuple[int, int] = (0, 0)
    # ${agent}: the agent's index among the agents given a share of the step, in the order
    # split_over_engines lists them (0, 1, ...), as first_user numbers users.
    agent_index: int = 0


@dataclass(frozen=True)
class JobReport:
    """One interval of one job from one agent, already decoded (see convert.py): a row per
    (target, request), and the agent's own `*`/`*` merge of them."""

    job_id: str
    agent_id: str
    seq: int  # the agent's sequence number, acknowledged once the interval is stored
    interval_start_ms: int
    rows: tuple[StatsRow, ...]
    total: StatsRow
    final: bool
    error_samples: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportLimits:
    """What an agent's report for a job may hold, checked before anything is decoded: rows
    only for the plan's (scenario, target, request) triples (any names when a Gatling project
    names its own requests) plus the agent's total, checks only of the names the row's request
    declares, and histograms of a sane size."""

    # (scenario, target URL, request): a plain plan's scenario is "", and its total
    # ("", *, *); a plan with scenarios has each scenario's rows and the total (*, *, *).
    keys: frozenset[tuple[str, str, str]] | None
    max_rows: int
    max_histogram_bytes: int = 256 * 1024
    # Per request name, the check and extraction names its rows may carry (a name two
    # scenarios share: those of both); under `*` those of every request (the total's). None:
    # any names (a Gatling project's own simulation names its checks). O(requests × 32 names):
    # the plan's, at most 16 + 16 per request.
    check_names: Mapping[str, frozenset[str]] | None = None

    @classmethod
    def of_plan(cls, plan: Plan, *, max_unnamed_rows: int) -> ReportLimits:
        """A job's limits from its plan: its (scenario, target, request) triples and declared
        checks, or any names and `max_unnamed_rows` rows when a Gatling project names its own
        requests."""
        if plan.gatling and plan.gatling.project:
            return cls(keys=None, max_rows=max_unnamed_rows)
        keys = set()
        for scenario in plan.each_scenario():
            label = "" if scenario.implicit else scenario.name
            names = {r.name for r in scenario.requests}
            keys |= {(label, t.url, n) for t in scenario.targets_of(plan.targets) for n in names}
        keys.add(("" if not plan.scenarios else TOTAL, TOTAL, TOTAL))
        return cls(keys=frozenset(keys), max_rows=len(keys), check_names=declared_checks(plan))


def declared_checks(plan: Plan) -> dict[str, frozenset[str]]:
    """Per request, the names a driver counts its checks under: each check's, and each
    extraction's "extract <variable>" (journeys.Extract.name, as the engine and the Gatling
    driver name it); the implicit status check has none (it is counted in check_failed).
    Under `*`, every request's."""
    names: dict[str, frozenset[str]] = {}
    for scenario in plan.each_scenario():
        for r in scenario.requests:
            names[r.name] = names.get(r.name, frozenset()) | {
                *(c.name for c in r.checks),
                *(e.name for e in r.extracts),
            }
    return {**names, TOTAL: frozenset().union(*names.values())}


@dataclass(frozen=True)
class EngineFailure:
    """An engine of an agent's job ended before the job (agent.proto EngineFailure)."""

    job_id: str
    agent_id: str
    engine: int  # its position among the agent's engines
    pid: int
    how: str
    stderr_tail: str
    reported_requests: int
    # A job with scenarios: (scenario index, requests) its share of each reported.
    reported_by_scenario: tuple[tuple[int, int], ...] = ()

    def reported(self) -> dict[int | None, int]:
        """Its requests per scenario index, or under None all of them (a plain plan's)."""
        if self.reported_by_scenario:
            return dict(self.reported_by_scenario)
        return {None: self.reported_requests}
