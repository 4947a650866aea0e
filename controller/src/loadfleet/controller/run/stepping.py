"""The step being run: its launch (each agent's share of its load, with a barrier start), the
agents' messages about it (reports, job states, health, hosts, engine failures, spool
drops), waiting for its end, and its figures at the end.

A step is a job of its own (`jobs.job_id_for`): its load is split over the run's agents,
each agent gets an assignment, and the step ends when every agent has ended its job (or
the deadline passes). Agents' reports go into the revision window (window.py), which
publishes each interval once, final, in order, to the run's pipeline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

from loadfleet.controller.analysis.genbound import is_loopback
from loadfleet.controller.analysis.progress import RunProgress
from loadfleet.controller.fleet.agents import AgentRecord, AgentRegistry
from loadfleet.controller.fleet.feedrows import FeedRows
from loadfleet.controller.fleet.feedsplit import feed_slices
from loadfleet.controller.fleet.jobs import EngineFailure, JobAssignment, JobReport, JobState, ReportLimits, job_id_for
from loadfleet.controller.fleet.losses import FleetLosses, Loss, StepShares
from loadfleet.controller.fleet.scheduler import (
    DEFAULT_BARRIER_LEAD_MS,
    AgentShare,
    EngineShare,
    barrier_start_ms,
    split_over_engines,
    split_scenarios,
)
from loadfleet.controller.fleet.spooldrops import AgentSpoolDrop
from loadfleet.controller.model.driver import Driver
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo
from loadfleet.controller.model.load import LoadModel
from loadfleet.controller.model.scenariospan import ScenarioSpan
from loadfleet.controller.model.stepresult import StepResult
from loadfleet.controller.plan import steps
from loadfleet.controller.plan.model import Plan
from loadfleet.controller.plan.steps import StepSpec
from loadfleet.controller.run import announcements
from loadfleet.controller.run.course import Course, step_state
from loadfleet.controller.run.pipeline import RunPipeline
from loadfleet.controller.run.records import JobEnded, KneeRecorded, ShareLost, StepHalted, StepStarted
from loadfleet.controller.stream.contract import AGENT_DETAIL_MAX_ROWS, StepWindow
from loadfleet.controller.stream.window import ClosedInterval, IntervalWindow, Outcome

log = logging.getLogger(__name__)

# Extra time after the planned end for final reports before the step ends anyway.
FINISH_SLACK_MS = 10_000
TICK_S = 0.2
# Barrier lead of a sweep's later steps: the agents are connected and idle, and only
# need to start their engines.
STEP_BARRIER_LEAD_MS = 1000
# A JVM takes 3-8 s to start and warm up Gatling: its barrier is set further ahead.
GATLING_BARRIER_LEAD_MS = 10_000
# Rows a report may hold when a Gatling project names its own requests.
MAX_UNNAMED_ROWS = 1000


@dataclass
class StepRun:
    """The step being run: its window, its agents' shares and how their jobs ended."""

    spec: StepSpec
    window: StepWindow
    engines: dict[str, int] = field(default_factory=dict)  # agent -> engines running its share
    ended: dict[str, JobState] = field(default_factory=dict)
    shares: StepShares | None = None  # who runs which part of its load (losses.py)

    def runs(self, agent_id: str, job_id: str | None = None) -> bool:
        """Whether the agent runs a share of this step (of its job, when one is named) and
        has not ended it."""
        return (
            (job_id is None or job_id == self.window.job_id) and agent_id in self.engines and agent_id not in self.ended
        )


class StepRunner:
    """Runs a run's steps one at a time; `current` is the one running (None between steps)."""

    def __init__(
        self,
        run_id: str,
        plan: Plan,
        registry: AgentRegistry,
        pipeline: RunPipeline,
        progress: RunProgress,
        course: Course,
        *,
        lease_s: float,
        revision_ms: int,
        clock_ms: Callable[[], int],
        emit: Callable[[Event], None],
    ):
        self._run_id = run_id
        self._plan = plan
        self._registry = registry
        self._pipeline = pipeline
        self._progress = progress
        self._course = course
        self._clock_ms = clock_ms
        self._emit = emit
        self.current: StepRun | None = None
        # What becomes of a lost agent's or failed engine's share; its losses go into the
        # run's progress.
        self.losses = FleetLosses(
            plan.agents.on_loss,
            lease_s,
            registry,
            emit=emit,
            journal=self._journal_loss,
            halt=self.halt,
            clock_ms=clock_ms,
            losses=progress.losses,
            rows_lost=pipeline.ledger_rows_lost,
        )
        self.outcomes: dict[JobState, int] = {}  # jobs ended, by state
        self._job_steps: dict[str, str] = {}  # job id -> step name: O(steps)
        self._late_told: set[str] = set()  # steps whose late reports have had their event
        self._off_grid: set[str] = set()  # agents whose reports fell off the interval grid: O(agents)
        # The window publishes into the pipeline; its revision window is the job's lease
        # (an agent late by less than that is late, not lost) and at least the grace.
        self.window = IntervalWindow(revision_ms=revision_ms, publish=self._publish, settle=pipeline.settle)

    def report_limits(self, agent_id: str, job_id: str) -> ReportLimits | None:
        """What `agent_id` may report for `job_id`; None when that is no job of this agent."""
        if job_id not in self._job_steps or agent_id not in self._progress.agents:
            return None
        return self._limits

    @cached_property  # the plan does not change: computed once, not at every report
    def _limits(self) -> ReportLimits:
        return ReportLimits.of_plan(self._plan, max_unnamed_rows=MAX_UNNAMED_ROWS)

    # ---- a step's life -----------------------------------------------------------

    async def run(self, spec: StepSpec, agents: list[AgentRecord], *, first: bool) -> StepResult:
        """Runs the step on `agents` (connected ones) to its end."""
        plan = steps.step_plan(self._plan, spec)
        slots = [(a.agent_id, a.identity.cores) for a in agents]
        if plan.scenarios:
            shares = split_scenarios([(s.load, s.max_requests) for s in plan.scenarios], slots)
        else:
            shares = split_over_engines(plan.load, plan.max_requests, slots)
        rows = feed_slices(plan.feed, shares)
        step = self._open(spec, plan, shares, rows, first=first)
        self._pipeline.ledger_slices(rows)
        for agent_index, share in enumerate(shares):
            start_at_ms = step.window.load_start_ms
            assignment = JobAssignment(
                job_id=step.window.job_id,
                plan=plan,
                engines=share.engines,
                start_at_ms=start_at_ms,
                feed_rows=rows.get(share.agent_id, (0, 0)),
                agent_index=agent_index,
            )
            record = self._registry.get(share.agent_id)
            assert record is not None and record.link is not None  # as `agents`: nothing awaited since
            record.link.assign(assignment)
            self._registry.hold(share.agent_id, plan.agents.lease_s)
        self._emit(announcements.step_started(self._run_id, self._plan, spec, plan, shares))
        return await self.collect()

    def _open(
        self, spec: StepSpec, plan: Plan, shares: list[AgentShare], rows: dict[str, tuple[int, int]], *, first: bool
    ) -> StepRun:
        lead_ms = DEFAULT_BARRIER_LEAD_MS if first else STEP_BARRIER_LEAD_MS
        if plan.driver is Driver.GATLING:
            lead_ms = max(lead_ms, GATLING_BARRIER_LEAD_MS)
        load_start = barrier_start_ms(self._clock_ms(), plan.interval_ms, lead_ms)
        sweep = self._plan.sweep
        window = StepWindow(
            name=spec.name,
            index=len(self._progress.results),
            job_id=job_id_for(self._run_id, spec.name, single=sweep is None),
            interval_ms=plan.interval_ms,
            load_start_ms=load_start,
            load_end_ms=load_start + int(plan.duration_s * 1000),
            warmup_ms=round((sweep.warmup_s if sweep else plan.warmup_s) * 1000),
            cooldown_ms=plan.interval_ms if sweep else 0,
            load=plan.describe_load(),
            agent_detail=len(shares) * plan.rows_per_report() <= AGENT_DETAIL_MAX_ROWS,
            scenarios=tuple(
                ScenarioSpan(
                    s.name,
                    load_start + round(s.start_after_s * 1000),
                    load_start + round(s.end_s(plan.duration_s) * 1000),
                    s.load.describe(),
                )
                for s in plan.scenarios
            ),
        )
        engines = {s.agent_id: len(s.engines) for s in shares}
        by_agent = {s.agent_id: s.engines for s in shares}
        feed_rows = FeedRows(plan.feed, rows, plan.interval_ms) if plan.feed and rows else None
        shares_of_step = StepShares(window.job_id, spec.name, plan.interval_ms, by_agent, window.scenarios, feed_rows)
        step = StepRun(spec, window, engines, shares=shares_of_step)
        self._pipeline.record(StepStarted(window, engines, by_agent))
        self.resume(step)
        return step

    def resume(self, step: StepRun, *, watermark_ms: int | None = None) -> None:
        """`step` is the running one (a new step, or one taken over from the journal)."""
        self._job_steps[step.window.job_id] = step.spec.name
        self.window.open_step(step.window, [a for a in step.engines if a not in step.ended], watermark_ms=watermark_ms)
        self.current = step

    async def collect(self, *, not_before_ms: int = 0) -> StepResult:
        """Waits for every agent to end its share of the running step (or the deadline, not
        before `not_before_ms`), publishing intervals as they fall due; then ends the step."""
        step = self.current
        assert step is not None
        deadline_ms = max(not_before_ms, step.window.load_end_ms + self._plan.request_timeout_ms + FINISH_SLACK_MS)
        while len(step.ended) < len(step.engines) and self._clock_ms() < deadline_ms:
            self.window.publish_due(self._clock_ms())
            await asyncio.sleep(TICK_S)
        missing = sorted(set(step.engines) - set(step.ended))
        if missing:
            log.warning("run %s: no final report of %s from %s", self._run_id, step.spec.name, ", ".join(missing))
        return await self.end(interrupted=False)

    async def end(self, *, interrupted: bool) -> StepResult:
        """Ends the running step: its last intervals published, its figures measured."""
        step = self.current
        assert step is not None
        self.window.close_step()
        await self._pipeline.published()
        if step.shares:
            step.shares.closed = True
        for agent_id in step.engines:
            self._registry.hold(agent_id, 0)
        window = self.window.step or step.window
        result = self._measure(step, window, interrupted=interrupted)
        self._progress.results.append(result)
        self.current = None
        self._pipeline.step_end(window, result, watermark_ms=self.window.watermark_ms, late=self._progress.late)
        if self._plan.sweep:
            self._emit(Event(EventKind.STEP_FINISHED, result.describe()))
        if result.generator_bound:
            self._emit(Event(EventKind.GENERATOR_BOUND, result.generator_advice))
        found = self._course.knee_after(step.spec, stopped=window.stopped)
        if found is not None:
            self._pipeline.record(KneeRecorded(found.servers, self._progress.knees[found.servers]))
            self._emit(Event(EventKind.KNEE, found.note))
        return result

    def _measure(self, step: StepRun, window: StepWindow, *, interrupted: bool) -> StepResult:
        state = step_state(interrupted=interrupted, stopped=window.stopped, ended=list(step.ended.values()))
        measured = self._pipeline.meter.result(step.spec, window, state)
        demand = (
            measured.offered / measured.achieved_rps
            if self._plan.load.model is LoadModel.OPEN and measured.achieved_rps
            else 0.0
        )
        result = self._pipeline.measure(
            step.spec, window, state, agents=len(step.engines), demand_ratio=demand, one_host=self._one_host()
        )
        return replace(result, losses=self.losses.in_step(step.spec.name))

    def _one_host(self) -> bool:
        """Whether the run's agents share one host with each other or with loopback targets."""
        if len(self._progress.hostnames) != 1:
            return False
        return len(self._progress.agents) > 1 or any(is_loopback(t.url) for t in self._plan.targets)

    def halt(self) -> None:
        """Asks every agent of the running step to end its share now."""
        step = self.current
        if step is None or step.window.stopped:
            return
        step.window = step.window.halted(self._clock_ms())
        self.window.update_step(step.window)
        self._pipeline.record(StepHalted(step.window.name, step.window.load_end_ms))
        for agent_id in step.engines:
            record = self._registry.get(agent_id)
            if record and record.link:
                record.link.stop_job(step.window.job_id)

    # ---- the agents' messages about it ---------------------------------------------

    def on_report(self, report: JobReport) -> None:
        outcome = self.window.add(report)
        step = self.current
        if report.total.feed_taken and step and step.shares and report.job_id == step.window.job_id:
            step.shares.heard_rows(report.agent_id, report.total.feed_taken)  # at once, published or not
        if outcome is Outcome.ACCEPTED:
            self.window.publish_due(self._clock_ms())
        elif outcome is Outcome.UNEXPECTED and report.agent_id not in self._off_grid:
            self._off_grid.add(report.agent_id)  # told once: every later report would be the same
            log.warning(
                "run %s: agent %s reported an interval at %d ms, which is not on the step's grid of job %s "
                "(its clock, or another job's report): not counted",
                self._run_id,
                report.agent_id,
                report.interval_start_ms,
                report.job_id,
            )
        elif outcome is Outcome.LATE:
            late = self._progress.late
            late[report.agent_id] = late.get(report.agent_id, 0) + report.total.requests
            if step is not None and step.window.name not in self._late_told:  # once a step: a fleet can be late at once
                self._late_told.add(step.window.name)
                self._emit(announcements.late_reports(step.window.name, report.agent_id, report.interval_start_ms))

    def on_job_state(self, agent_id: str, job_id: str, state: JobState, message: str) -> None:
        step = self.current
        if step is None or job_id != step.window.job_id or agent_id not in step.engines:
            return
        if state is JobState.READY:
            # Gatling's JVM takes seconds to start: its agent says when it is ready and how
            # late its load starts (an engine is ready at once: nothing to tell).
            if self._plan.driver is Driver.GATLING:
                self._emit(Event(EventKind.DRIVER_READY, f"{agent_id}: {message}", agent_id))
            return
        if not state.ended or agent_id in step.ended:
            return
        # A job stopped though nobody stopped the step: its agent ended it (its lease ran out
        # while the controller did not answer, or the agent is shutting down). Its share of
        # the step is lost from now on, as an agent's that was lost.
        stopped_itself = state is JobState.STOPPED and not step.window.stopped
        if stopped_itself:
            self.lose_share(agent_id, silent_s=self.losses.lease_s)  # its load has stopped
        step.ended[agent_id] = state
        if step.shares:
            step.shares.ended(agent_id)
        self.outcomes[state] = self.outcomes.get(state, 0) + 1
        self.window.agent_ended(agent_id)
        self._pipeline.record(JobEnded(step.window.name, agent_id, state))
        if state is JobState.FAILED or stopped_itself:
            self._emit(Event(EventKind.JOB_FAILED, f"{agent_id}: {message}", agent_id))

    def on_health(self, agent_id: str, health: Health) -> None:
        step = self.current
        if step is not None and step.runs(agent_id):
            self._pipeline.health(step.window, agent_id, health, self._clock_ms(), step.engines[agent_id])

    def on_host(self, agent_id: str, monitor: MonitorInfo, sample: HostSample) -> None:
        """A monitor-only agent's heartbeat: its host's figures, kept while load runs."""
        if self.current is not None:
            self._pipeline.host(self.current.window, agent_id, monitor, sample)

    def agent_lost(self, agent_id: str, *, silent_s: float) -> None:
        """A lost agent's share of the running step ended failed, and is lost."""
        step = self.current
        if step and step.runs(agent_id):
            step.ended[agent_id] = JobState.FAILED
            self.window.agent_gone(agent_id)
            self.lose_share(agent_id, silent_s=silent_s)

    def lose_share(self, agent_id: str, *, silent_s: float) -> None:
        """The agent's share of the step is lost (losses.py), with what it used of it: its
        requests reported and held, and its busiest interval."""
        step = self.current
        if step and step.shares:

            def use(scenario: str | None) -> tuple[int, int]:
                requests, busiest = self._pipeline.agent_use(step.window.name, agent_id, scenario)
                return requests + self.window.held_requests(agent_id, scenario), busiest

            self.losses.agent_lost(step.shares, agent_id, silent_s, use)

    def on_agent_late(self, agent_id: str, reason: str) -> None:
        step = self.current
        if step and step.runs(agent_id):
            self.losses.late(agent_id, reason)

    def on_engine_failure(self, failure: EngineFailure) -> None:
        step = self.current
        if step and step.shares and failure.job_id == step.window.job_id:
            _, busiest = self._pipeline.meter.agent_use(step.window.name, failure.agent_id)
            self.losses.engine_failed(step.shares, failure, busiest)

    def on_spool_dropped(self, agent_id: str, drop: AgentSpoolDrop) -> None:
        """The reports an agent's spool dropped are waited for no longer."""
        step = self.current
        if drop.reports and step is not None and drop.job_id == step.window.job_id:
            self.window.reports_dropped(agent_id, drop.first_interval_ms, drop.last_interval_ms)
            self.window.publish_due(self._clock_ms())

    def _journal_loss(self, loss: Loss, updated: dict[str, tuple[EngineShare, ...]]) -> None:
        self._pipeline.record(ShareLost(loss, updated))
        self._pipeline.ledger_handed(updated)

    def _publish(self, closed: ClosedInterval) -> None:
        self._pipeline.publish(closed, late=self._progress.late)
        for event in announcements.scenario_edges(closed.step, closed.start_ms, closed.end_ms):
            self._emit(event)
