"""One run of a plan: choose agents, assign shares, barrier start, collect, finish.

A `Run` owns its aggregator, its events and its watchers. The RPC layer feeds it
decoded agent reports and job states; it sends assignments through the agents'
links. Watchers receive `IntervalUpdate`, `Event` and finally the `RunSummary`.
"""
from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import rundir
from .agents import AgentRecord, AgentRegistry, AgentState, Health
from .aggregate import RunAggregator
from .errors import NotEnoughAgents
from .events import Event, EventKind
from .figures import Figures, figures_of
from .jobs import JobAssignment, JobReport, JobState
from .plan import Plan
from .scheduler import barrier_start_ms, split_over_engines
from .sinks import Sink
from .sinks.points import agent_point, event_point, http_points, step_point
from .summary import RunSummary, summarize

log = logging.getLogger(__name__)

# How long after an interval ends the controller waits for missing agent reports
# before publishing the interval without them (a late report revises it).
DEFAULT_GRACE_MS = 2500
# Extra time after the planned end for final reports before the run ends anyway.
FINISH_SLACK_MS = 10_000
TICK_S = 0.2
# Until sweeps exist every run is one step.
SINGLE_STEP = "main"
# A generator whose host CPU is at least this busy cannot be trusted to keep up.
SATURATED_CPU_PCT = 95.0


class RunState(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"

    @property
    def ended(self) -> bool:
        return self in (RunState.FINISHED, RunState.STOPPED, RunState.FAILED)


@dataclass(frozen=True)
class IntervalUpdate:
    interval_start_ms: int
    agents: int
    figures: Figures
    revised: bool


def now_ms() -> int:
    return int(time.time() * 1000)


class Run:
    def __init__(self, run_id: str, plan: Plan, run_dir: Path, registry: AgentRegistry,
                 *, sinks: list[Sink] = (), grace_ms: int = DEFAULT_GRACE_MS,
                 clock_ms: Callable[[], int] = now_ms):
        self.run_id = run_id
        self.plan = plan
        self.run_dir = run_dir
        self.state = RunState.STARTING
        self.started_ms = clock_ms()
        self.finished_ms = 0
        self.summary: RunSummary | None = None
        self._registry = registry
        self._sinks = list(sinks)
        self._grace_ms = grace_ms
        self._clock_ms = clock_ms
        self._events: list[Event] = []
        self._watchers: set[asyncio.Queue] = set()
        self._assigned: dict[str, JobAssignment] = {}  # agent id -> its share
        self._ended: dict[str, JobState] = {}
        self._aggregator = RunAggregator([])
        self._stop_requested = False
        self._load_start_ms = 0
        self._load_end_ms = 0

    @property
    def job_id(self) -> str:
        return self.run_id

    @property
    def agent_ids(self) -> list[str]:
        return sorted(self._assigned)

    @property
    def total_requests(self) -> int:
        return self.summary.total.figures.requests if self.summary else 0

    # ---- driven by the controller -------------------------------------------------

    async def execute(self) -> RunSummary:
        message = ""
        try:
            agents = await self._choose_agents()
            self._assign(agents)
            self.state = RunState.RUNNING
            await self._collect()
        except NotEnoughAgents as exc:
            self.state = RunState.FAILED
            message = str(exc)
        except Exception as exc:  # a bug must end the run visibly, not hang watchers
            log.exception("run %s failed", self.run_id)
            self.state = RunState.FAILED
            message = f"internal error: {exc!r}"
        summary = self._finish(message)
        for sink in self._sinks:
            log.info("run %s: %s", self.run_id, await sink.close())
        return summary

    def on_report(self, report: JobReport) -> None:
        if report.agent_id not in self._assigned or self.state.ended:
            return
        revised = self._aggregator.add(report.agent_id, report.interval_start_ms, report.rows)
        if self._sinks:  # points carry percentiles, which cost CPU to compute
            self._to_sinks(http_points(run_id=self.run_id, step=SINGLE_STEP, scope="agent",
                                       agent=report.agent_id, interval_start_ms=report.interval_start_ms,
                                       interval_ms=self.plan.interval_ms, rows=report.rows))
        if revised:
            self._publish_interval(report.interval_start_ms, revised=True)

    def on_job_state(self, agent_id: str, state: JobState, message: str) -> None:
        if agent_id not in self._assigned or not state.ended:
            return
        self._ended[agent_id] = state
        if state is JobState.FAILED:
            self._emit(Event(EventKind.JOB_FAILED, f"{agent_id}: {message}", agent_id))

    def on_health(self, agent_id: str, health: Health) -> None:
        if agent_id not in self._assigned or agent_id in self._ended or self.state is not RunState.RUNNING:
            return
        self._to_sinks([agent_point(run_id=self.run_id, agent_id=agent_id, health=health, at_ms=self._clock_ms(),
                                    saturated=health.cpu_pct >= SATURATED_CPU_PCT)])

    def on_agent_lost(self, agent_id: str, reason: str) -> None:
        if agent_id not in self._assigned or agent_id in self._ended or self.state.ended:
            return
        self._ended[agent_id] = JobState.FAILED
        self._aggregator.drop_agent(agent_id)
        self._emit(Event(EventKind.AGENT_LOST, f"agent {agent_id} lost: {reason}; "
                         "the run continues with the remaining agents", agent_id))

    def stop(self) -> None:
        """Asks every agent to end its share now; the run then finishes normally."""
        if self._stop_requested or self.state.ended:
            return
        self._stop_requested = True
        self._emit(Event(EventKind.RUN_STOPPED, "stopped by request"))
        for agent_id in self._assigned:
            record = self._registry.get(agent_id)
            if record and record.link:
                record.link.stop_job(self.job_id)

    def subscribe(self) -> asyncio.Queue:
        """A queue of this run's updates: past events first, then live ones, then the
        summary; None marks the end."""
        queue: asyncio.Queue = asyncio.Queue()
        for event in self._events:
            queue.put_nowait(event)
        if self.summary:
            queue.put_nowait(self.summary)
            queue.put_nowait(None)
        else:
            self._watchers.add(queue)
        return queue

    # ---- phases ------------------------------------------------------------------

    async def _choose_agents(self) -> list[AgentRecord]:
        selection = self.plan.agents
        wanted = selection.count or 1
        deadline = time.monotonic() + selection.wait_s
        while True:
            idle = self._registry.idle(selection.matches)
            if len(idle) >= wanted:
                return idle[:wanted] if selection.count else idle
            if time.monotonic() >= deadline or self._stop_requested:
                raise NotEnoughAgents(
                    f"needed {wanted} idle agent(s) matching {dict(selection.labels) or 'any labels'}, "
                    f"found {len(idle)} after {selection.wait_s:g} s")
            await self._registry.wait_changed(min(0.5, max(0.0, deadline - time.monotonic())))

    def _assign(self, agents: list[AgentRecord]) -> None:
        shares = split_over_engines(self.plan.load, self.plan.max_requests,
                                    [(a.agent_id, a.identity.cores) for a in agents])
        self._load_start_ms = barrier_start_ms(self._clock_ms(), self.plan.interval_ms)
        self._load_end_ms = self._load_start_ms + int(self.plan.duration_s * 1000)
        self._aggregator = RunAggregator(s.agent_id for s in shares)
        rundir.write_plan(self.run_dir, self.plan.to_yaml())
        for share in shares:
            record = self._registry.get(share.agent_id)
            assignment = JobAssignment(job_id=self.job_id, plan=self.plan, engines=share.engines,
                                       start_at_ms=self._load_start_ms)
            self._assigned[share.agent_id] = assignment
            record.state = AgentState.BUSY
            record.link.assign(assignment)
        split = ", ".join(f"{s.agent_id}: {s.load.describe()}" for s in shares)
        budget = f", {self.plan.max_requests} requests at most" if self.plan.max_requests else ""
        self._emit(Event(EventKind.RUN_STARTED,
                         f"run {self.run_id}: {self.plan.load.describe()} on {len(shares)} agent(s) "
                         f"({split}) for {self.plan.duration_s:g} s{budget}"))

    async def _collect(self) -> None:
        deadline_ms = self._load_end_ms + self.plan.request_timeout_ms + FINISH_SLACK_MS
        while len(self._ended) < len(self._assigned) and self._clock_ms() < deadline_ms:
            self._publish_due(self._clock_ms())
            await asyncio.sleep(TICK_S)
        missing = sorted(set(self._assigned) - set(self._ended))
        if missing:
            log.warning("run %s: no final report from %s", self.run_id, ", ".join(missing))

    def _finish(self, message: str) -> RunSummary:
        self._publish_due(2**62)
        if not self.state.ended:
            self.state = self._final_state()
        if not message and self.state is RunState.FAILED:
            message = "no agent finished its share"
        self.finished_ms = self._clock_ms()
        for agent_id in self._assigned:
            record = self._registry.get(agent_id)
            if record and record.state is AgentState.BUSY:
                record.state = AgentState.IDLE
        self._emit(Event(EventKind.RUN_FINISHED, f"run {self.run_id} {self.state.value}"
                         + (f": {message}" if message else "")))
        self.summary = summarize(
            run_id=self.run_id, plan_name=self.plan.name, state=self.state.value, message=message,
            run_dir=str(self.run_dir), started_ms=self._load_start_ms or self.started_ms,
            duration_s=self._measured_seconds(), aggregator=self._aggregator,
            agent_ids=self.agent_ids, events=self._events,
        )
        self._to_sinks([step_point(
            run_id=self.run_id, step=SINGLE_STEP, servers=len(self.plan.targets),
            offered=self.plan.load.peak, start_ms=self.summary.started_ms,
            total=self.summary.total.figures, bytes_per_s=self.summary.total.figures.mb_per_s * 1e6,
            generator_bound=False)])
        if self._assigned:
            rundir.write_results(self.run_dir, self.summary, self._aggregator, self.plan.interval_ms)
        for queue in self._watchers:
            queue.put_nowait(self.summary)
            queue.put_nowait(None)
        self._watchers.clear()
        return self.summary

    def _final_state(self) -> RunState:
        if not any(state is JobState.FINISHED or state is JobState.STOPPED
                   for state in self._ended.values()):
            return RunState.FAILED
        return RunState.STOPPED if self._stop_requested else RunState.FINISHED

    def _measured_seconds(self) -> float:
        """Seconds covered by the intervals that hold data (the whole planned duration
        for a full run; less when stopped early)."""
        intervals = self._aggregator.intervals()
        if not intervals:
            return 0.0
        planned_end = self._load_end_ms
        last_end = min(intervals[-1] + self.plan.interval_ms, planned_end)
        return max(0.001, (last_end - intervals[0]) / 1000)

    # ---- publishing --------------------------------------------------------------

    def _publish_due(self, at_ms: int) -> None:
        for start in self._aggregator.due(at_ms, self.plan.interval_ms, self._grace_ms):
            self._publish_interval(start, revised=False)

    def _publish_interval(self, start: int, *, revised: bool) -> None:
        total = self._aggregator.cluster_total(start)
        update = IntervalUpdate(
            interval_start_ms=start,
            agents=len(self._aggregator.agents_in(start)),
            figures=figures_of(total, self.plan.interval_ms / 1000),
            revised=revised,
        )
        for queue in self._watchers:
            queue.put_nowait(update)
        if self._sinks:
            self._to_sinks(http_points(run_id=self.run_id, step=SINGLE_STEP, scope="cluster", agent="",
                                       interval_start_ms=start, interval_ms=self.plan.interval_ms,
                                       rows=self._aggregator.rows_in(start)))

    def _to_sinks(self, points) -> None:
        for sink in self._sinks:
            sink.add(points)

    def _emit(self, event: Event) -> None:
        log.info("%s", event.text)
        self._events.append(event)
        for queue in self._watchers:
            queue.put_nowait(event)
        self._to_sinks([event_point(run_id=self.run_id, event=event)])
