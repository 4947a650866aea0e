"""One run of a plan: choose agents, run its steps one after the other, finish.

Every step is a job of its own (`jobs.job_id_for`): the step's load is split over the
run's agents, each agent gets an assignment with a barrier start, and the step ends when
every agent has ended its job. A plan without a sweep has one step, `main`, whose job is
the run itself.

The run is a stream (stream.py). Agents' reports go into the revision window
(window.py), which publishes each interval once, final, in order, to the consumers: the
run directory and its journal, run totals, step measurement, drift, target health, stop
conditions, InfluxDB and the live followers. When a step ends its figures are measured
(with the generators' health and the monitored hosts over it) and published as the
step's end; at the run's end the summary is written. Nothing here grows with the run's
length: per-interval state lives in the window, everything else is O(agents × rows +
steps).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from loadfleet.controller.analysis.genbound import is_loopback
from loadfleet.controller.analysis.knee import Knee
from loadfleet.controller.analysis.stops import Condition, StopReason
from loadfleet.controller.analysis.summary import RunSummary, summarize
from loadfleet.controller.analysis.sweep import analyze, knee_search
from loadfleet.controller.fleet.agents import AgentRecord, AgentRegistry, AgentState
from loadfleet.controller.fleet.jobs import EngineFailure, JobAssignment, JobReport, JobState, ReportLimits, job_id_for
from loadfleet.controller.fleet.losses import FleetLosses, Loss, StepShares
from loadfleet.controller.fleet.scheduler import DEFAULT_BARRIER_LEAD_MS, barrier_start_ms, split_over_engines
from loadfleet.controller.fleet.spooldrops import AgentSpoolDrop, agent_drop_event
from loadfleet.controller.model.codec import to_doc
from loadfleet.controller.model.errors import NotEnoughAgents
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo
from loadfleet.controller.model.load import LoadModel
from loadfleet.controller.model.selfsample import ControllerSample
from loadfleet.controller.model.stepresult import StepResult, StepState
from loadfleet.controller.output.rundisk import DiskTrouble
from loadfleet.controller.output.sinks import Sink
from loadfleet.controller.output.watchers import Follower, Watchers
from loadfleet.controller.plan import steps
from loadfleet.controller.plan.model import Plan
from loadfleet.controller.plan.steps import SINGLE_STEP, StepSpec
from loadfleet.controller.run import announcements
from loadfleet.controller.run.admission import choose_agents
from loadfleet.controller.run.journal import Record
from loadfleet.controller.run.pipeline import RunPipeline
from loadfleet.controller.stream.contract import AGENT_DETAIL_MAX_ROWS, StepWindow
from loadfleet.controller.stream.window import ClosedInterval, IntervalWindow, Outcome
from loadfleet.wire.stats import TOTAL

log = logging.getLogger(__name__)

# How long after an interval ends the controller waits for missing agent reports before
# publishing the interval without them (at least; a job's lease, if longer, counts).
DEFAULT_GRACE_MS = 2500
# Extra time after the planned end for final reports before the run ends anyway.
FINISH_SLACK_MS = 10_000
TICK_S = 0.2
# Barrier lead of a sweep's later steps: the agents are connected and idle, and only
# need to start their engines.
STEP_BARRIER_LEAD_MS = 1000
# A JVM takes 3-8 s to start and warm up Gatling: its barrier is set further ahead.
GATLING_BARRIER_LEAD_MS = 10_000
# An agent's clock off the controller's by more than this is an event (its times are converted).
CLOCK_OFFSET_LIMIT_MS = 100
# Rows a report may hold when a Gatling project names its own requests.
MAX_UNNAMED_ROWS = 1000

__all__ = ["SINGLE_STEP", "Run", "RunState"]


class RunState(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def ended(self) -> bool:
        return self in (RunState.FINISHED, RunState.STOPPED, RunState.FAILED, RunState.INTERRUPTED)


@dataclass
class _StepRun:
    """The step being run: its window, its agents' shares and how their jobs ended."""

    spec: StepSpec
    window: StepWindow
    engines: dict[str, int] = field(default_factory=dict)  # agent -> engines running its share
    ended: dict[str, JobState] = field(default_factory=dict)
    shares: StepShares | None = None  # who runs which part of its load (losses.py)


def now_ms() -> int:
    return int(time.time() * 1000)


class Run:
    def __init__(
        self,
        run_id: str,
        plan: Plan,
        run_dir: Path,
        registry: AgentRegistry,
        *,
        sinks: Sequence[Sink] = (),
        grace_ms: int = DEFAULT_GRACE_MS,
        lease_ms: int = 0,
        settle: Callable[[str, int], None] = lambda agent, seq: None,
        clock_ms: Callable[[], int] = now_ms,
    ):
        self.run_id = run_id
        self.plan = plan
        self.run_dir = run_dir
        self.state = RunState.STARTING
        self.started_ms = clock_ms()
        self.finished_ms = 0
        self.summary: RunSummary | None = None
        self._registry = registry
        self.sinks = list(sinks)
        self._clock_ms = clock_ms
        self._specs = steps.expand(plan)
        self._agents: list[str] = []
        self._hostnames: set[str] = set()
        self._clock_offsets_ms: dict[str, int] = {}  # the controller's clock minus each agent's
        self._lost: set[str] = set()
        self._step: _StepRun | None = None
        self._job_steps: dict[str, str] = {}  # job id -> step name: O(steps)
        self._outcomes: dict[JobState, int] = {}
        self._results: list[StepResult] = []
        self._stop_reason: StopReason | None = None
        self._knees: dict[int, Knee] = {}  # servers -> the knee found for them
        self._skipped: list[str] = []
        self._stop_requested = False
        self._late: dict[str, int] = {}  # agent -> requests in reports that came too late
        # While a job runs, agents keep its load this long without word from the controller.
        self._losses = FleetLosses(
            plan.agents.on_loss,
            max(plan.agents.lease_s, lease_ms / 1000),
            registry,
            emit=self._emit,
            journal=self._journal_loss,
            halt=self._halt_step,
            clock_ms=clock_ms,
        )
        self._late_told: set[str] = set()  # steps whose late reports have had their event
        self._off_grid: set[str] = set()  # agents whose reports fell off the interval grid: O(agents)
        # The window publishes into the pipeline; its revision window is the job's lease
        # (an agent late by less than that is late, not lost) and at least the grace.
        self._pipeline = RunPipeline(
            run_id,
            plan,
            run_dir,
            heartbeat_ms=registry.heartbeat_ms,
            sinks=self.sinks,
            on_stop=self._on_stop_condition,
            settle=settle,
        )
        revision_ms = max(grace_ms, round(plan.agents.lease_s * 1000) or lease_ms)
        self._window = IntervalWindow(revision_ms=revision_ms, publish=self._publish, settle=self._pipeline.settle)

    @property
    def agent_ids(self) -> list[str]:
        return sorted(self._agents)

    @property
    def plan_name(self) -> str:
        return self.plan.name

    def report_limits(self, agent_id: str, job_id: str) -> ReportLimits | None:
        """What `agent_id` may report for `job_id`; None when that is no job of this agent."""
        if job_id not in self._job_steps or agent_id not in self._agents:
            return None
        return self._limits

    @property
    def closed_before_ms(self) -> int:
        """Reports of intervals that start before this are no longer merged (window.py)."""
        return self._window.watermark_ms

    @cached_property  # the plan does not change: computed once, not at every report
    def _limits(self) -> ReportLimits:
        names = sorted({r.name for r in self.plan.requests})
        if self.plan.gatling and self.plan.gatling.project:  # the simulation names its requests
            return ReportLimits(keys=None, max_rows=MAX_UNNAMED_ROWS)
        keys = frozenset((t.url, n) for t in self.plan.targets for n in names) | {(TOTAL, TOTAL)}
        return ReportLimits(keys=keys, max_rows=len(keys))

    @property
    def total_requests(self) -> int:
        totals = self._pipeline.totals
        return self.summary.total.figures.requests if self.summary else sum(r.requests for r in totals.by_key.values())

    @property
    def watchers(self) -> Watchers:
        return self._pipeline.watchers

    @property
    def disk(self) -> DiskTrouble:
        return self._pipeline.trouble

    # ---- driven by the controller -------------------------------------------------

    async def execute(self) -> RunSummary:
        return await self._conclude(self._from_the_start())

    async def _from_the_start(self) -> str:
        chosen = await choose_agents(self._registry, self.plan, stopping=lambda: self._stop_requested)
        self._hostnames = {r.identity.hostname for r in chosen}
        self._agents = [r.agent_id for r in chosen]
        self._clock_offsets_ms = {r.agent_id: r.clock.offset_ms for r in chosen if r.clock}
        self._pipeline.start(
            agents=self._agents, hostnames=sorted(self._hostnames), clock_offsets_ms=self._clock_offsets_ms
        )
        self.state = RunState.RUNNING
        for r in chosen:
            if r.clock and abs(r.clock.offset_ms) > CLOCK_OFFSET_LIMIT_MS:
                self._emit(announcements.clock_offset(r.agent_id, r.clock))
        if self.plan.sweep:
            self._emit(
                Event(EventKind.RUN_STARTED, announcements.sweep_started(self.run_id, self.plan, len(self._agents)))
            )
        await self._run_steps(self._specs)
        return ""

    async def _conclude(self, course) -> RunSummary:
        """Runs the run's `course` (returning a message for the summary), whatever it
        raises, then writes the results and closes the sinks."""
        try:
            message = await course
        except NotEnoughAgents as exc:
            self.state = RunState.FAILED
            message = str(exc)
        except Exception as exc:  # a bug must end the run visibly, not hang followers
            log.exception("run %s failed", self.run_id)
            self.state = RunState.FAILED
            message = f"internal error: {exc!r}"
        summary = await self._finish(message)
        for sink in self.sinks:
            log.info("run %s: %s", self.run_id, await sink.close())
        return summary

    def on_report(self, report: JobReport) -> None:
        outcome = self._window.add(report)
        if outcome is Outcome.ACCEPTED:
            self._window.publish_due(self._clock_ms())
        elif outcome is Outcome.UNEXPECTED and report.agent_id not in self._off_grid:
            self._off_grid.add(report.agent_id)  # told once: every later report would be the same
            log.warning(
                "run %s: agent %s reported an interval at %d ms, which is not on the step's grid of job %s "
                "(its clock, or another job's report): not counted",
                self.run_id,
                report.agent_id,
                report.interval_start_ms,
                report.job_id,
            )
        elif outcome is Outcome.LATE:
            self._late[report.agent_id] = self._late.get(report.agent_id, 0) + report.total.requests
            step = self._step
            if step is not None and step.window.name not in self._late_told:  # once a step: a fleet can be late at once
                self._late_told.add(step.window.name)
                self._emit(announcements.late_reports(step.window.name, report.agent_id, report.interval_start_ms))

    def on_job_state(self, agent_id: str, job_id: str, state: JobState, message: str) -> None:
        step = self._step
        if state is JobState.READY:
            self._driver_ready(step, agent_id, job_id, message)
            return
        if (
            step is None
            or job_id != step.window.job_id
            or agent_id not in step.engines
            or not state.ended
            or agent_id in step.ended
        ):
            return
        # A job stopped though nobody stopped the step: its agent ended it (its lease ran out
        # while the controller did not answer, or the agent is shutting down). Its share of
        # the step is lost from now on, as an agent's that was lost.
        stopped_itself = state is JobState.STOPPED and not step.window.stopped
        if stopped_itself:
            self._lose_share(step, agent_id, silent_s=self._losses.lease_s)  # its load has stopped
        step.ended[agent_id] = state
        if step.shares:
            step.shares.ended(agent_id)
        self._outcomes[state] = self._outcomes.get(state, 0) + 1
        self._window.agent_ended(agent_id)
        self._pipeline.record(Record.JOB_ENDED, step=step.window.name, agent=agent_id, state=state.value)
        if state is JobState.FAILED or stopped_itself:
            self._emit(Event(EventKind.JOB_FAILED, f"{agent_id}: {message}", agent_id))

    def _driver_ready(self, step: _StepRun | None, agent_id: str, job_id: str, message: str) -> None:
        """Gatling's JVM takes seconds to start: its agent says when it is ready and how late
        its load starts (an engine is ready at once: nothing to tell)."""
        if (
            step is not None
            and job_id == step.window.job_id
            and agent_id in step.engines
            and self.plan.driver == "gatling"
        ):
            self._emit(Event(EventKind.DRIVER_READY, f"{agent_id}: {message}", agent_id))

    def on_health(self, agent_id: str, health: Health) -> None:
        step = self._step
        if step is None or agent_id not in step.engines or agent_id in step.ended or self.state is not RunState.RUNNING:
            return
        self._pipeline.health(step.window, agent_id, health, self._clock_ms(), step.engines[agent_id])

    def on_host(self, agent_id: str, monitor: MonitorInfo, sample: HostSample) -> None:
        """A monitor-only agent's heartbeat: its host's figures, kept while load runs."""
        if self.state is RunState.RUNNING and self._step is not None:
            self._pipeline.host(self._step.window, agent_id, monitor, sample)

    def on_controller(self, sample: ControllerSample) -> None:
        """The controller's own health (selfwatch.py), while this run has its agents."""
        if self._pipeline.open and not self.state.ended:
            self._pipeline.controller(sample)

    def on_agent_lost(self, agent_id: str, reason: str, *, silent_s: float = 0.0) -> None:
        """`silent_s`: how long ago it was last heard (its lease runs from then)."""
        if agent_id not in self._agents or agent_id in self._lost or self.state.ended:
            return
        self._lost.add(agent_id)
        self._emit(Event(EventKind.AGENT_LOST, f"agent {agent_id} lost: {reason}", agent_id))
        step = self._step
        if step and agent_id in step.engines and agent_id not in step.ended:
            step.ended[agent_id] = JobState.FAILED
            self._window.agent_gone(agent_id)
            self._lose_share(step, agent_id, silent_s=silent_s)

    def _lose_share(self, step: _StepRun, agent_id: str, *, silent_s: float) -> None:
        """The agent's share of the step is lost (losses.py), with what it used of it: its
        requests reported and held, and its busiest interval."""
        if step.shares:
            requests, busiest = self._pipeline.agent_use(step.window.name, agent_id)
            use = (requests + self._window.held_requests(agent_id), busiest)
            self._losses.agent_lost(step.shares, agent_id, silent_s, use)

    def on_agent_late(self, agent_id: str, reason: str) -> None:
        step = self._step
        if step and agent_id in step.engines and agent_id not in step.ended and not self.state.ended:
            self._losses.late(agent_id, reason)

    def on_agent_back(self, agent_id: str) -> None:
        if not self.state.ended:
            self._losses.back(agent_id)

    def on_agent_joined(self, record: AgentRecord) -> None:
        """A lost agent of this run is back: it takes part again from the next step."""
        if record.agent_id in self._lost and not self.state.ended:
            self._lost.discard(record.agent_id)
            record.state = AgentState.BUSY
            self._emit(
                Event(
                    EventKind.AGENT_BACK,
                    f"agent {record.agent_id} reconnected after it was lost; it takes part again from the next step",
                    record.agent_id,
                )
            )

    def on_engine_failure(self, failure: EngineFailure) -> None:
        step = self._step
        if step and step.shares and failure.job_id == step.window.job_id and not self.state.ended:
            _, busiest = self._pipeline.meter.agent_use(step.window.name, failure.agent_id)
            self._losses.engine_failed(step.shares, failure, busiest)

    def _journal_loss(self, loss: Loss, updated: dict) -> None:
        self._pipeline.record(Record.LOSS, loss=to_doc(loss), shares={a: to_doc(e) for a, e in updated.items()})

    def on_spool_dropped(self, agent_id: str, drop: AgentSpoolDrop) -> None:
        """An agent's spool dropped messages of a job (spooldrops.py): an event, and the
        reports dropped are waited for no longer."""
        if self.state.ended:
            return
        step = self._step
        if drop.reports and step is not None and drop.job_id == step.window.job_id:
            self._window.reports_dropped(agent_id, drop.first_interval_ms, drop.last_interval_ms)
            self._window.publish_due(self._clock_ms())
        self._emit(agent_drop_event(agent_id, drop))

    def stop(self) -> None:
        """Asks every agent to end its share now; the run then finishes normally."""
        if self._stop_requested or self.state.ended:
            return
        self._stop_requested = True
        self._emit(Event(EventKind.RUN_STOPPED, "stopped by request"))
        self._halt_step()

    def follow(self) -> Follower:
        """A follower of this run's updates: past events first, then live ones, then the summary."""
        return self._pipeline.watchers.follow()

    # ---- phases ------------------------------------------------------------------

    async def _run_steps(self, specs: list[StepSpec]) -> None:
        for i, spec in enumerate(specs):
            if (
                self._stop_requested
                or self._losses.abort
                or (self._stop_reason and self._stop_reason.condition is not Condition.KNEE)
            ):
                self._skip([s.name for s in specs[i:]])
                break
            if spec.servers in self._knees and self.plan.sweep and self.plan.sweep.stop_at_knee:
                self._skip_past_knee(spec)
                continue
            await self._run_step(spec, first=not self._results)

    async def _run_step(self, spec: StepSpec, *, first: bool) -> None:
        agents = [
            record for a in self._agents if a not in self._lost and (record := self._registry.get(a)) and record.link
        ]
        if not agents:
            raise NotEnoughAgents(f"no agent of the run is left for step {spec.name}")
        plan = steps.step_plan(self.plan, spec)
        shares = split_over_engines(plan.load, plan.max_requests, [(a.agent_id, a.identity.cores) for a in agents])
        lead_ms = DEFAULT_BARRIER_LEAD_MS if first else STEP_BARRIER_LEAD_MS
        if plan.driver == "gatling":
            lead_ms = max(lead_ms, GATLING_BARRIER_LEAD_MS)
        load_start = barrier_start_ms(self._clock_ms(), plan.interval_ms, lead_ms)
        sweep = self.plan.sweep
        window = StepWindow(
            name=spec.name,
            index=len(self._results),
            job_id=job_id_for(self.run_id, spec.name, single=sweep is None),
            interval_ms=plan.interval_ms,
            load_start_ms=load_start,
            load_end_ms=load_start + int(plan.duration_s * 1000),
            warmup_ms=round((sweep.warmup_s if sweep else plan.warmup_s) * 1000),
            cooldown_ms=plan.interval_ms if sweep else 0,
            load=plan.load.describe(),
            agent_detail=len(shares) * len(plan.targets) * len({r.name for r in plan.requests})
            <= AGENT_DETAIL_MAX_ROWS,
        )
        step = _StepRun(
            spec,
            window,
            engines={s.agent_id: len(s.engines) for s in shares},
            shares=StepShares(window.job_id, spec.name, plan.interval_ms, {s.agent_id: s.engines for s in shares}),
        )
        self._job_steps[window.job_id] = spec.name
        self._pipeline.record(
            Record.STEP,
            window=to_doc(window),
            engines=step.engines,
            shares={s.agent_id: to_doc(s.engines) for s in shares},
        )
        self._window.open_step(window, step.engines)
        self._step = step
        for share in shares:
            assignment = JobAssignment(job_id=window.job_id, plan=plan, engines=share.engines, start_at_ms=load_start)
            record = self._registry.get(share.agent_id)
            assert record is not None and record.link is not None  # as `agents` above: nothing awaited since
            record.link.assign(assignment)
            self._registry.hold(share.agent_id, plan.agents.lease_s)
        self._emit(announcements.step_started(self.run_id, self.plan, spec, plan, shares))
        await self._collect(step)

    async def _collect(self, step: _StepRun, *, not_before_ms: int = 0) -> None:
        """Waits for every agent to end its share (or the deadline, not before
        `not_before_ms`), publishing intervals as they fall due; then ends the step."""
        deadline_ms = max(not_before_ms, step.window.load_end_ms + self.plan.request_timeout_ms + FINISH_SLACK_MS)
        while len(step.ended) < len(step.engines) and self._clock_ms() < deadline_ms:
            self._window.publish_due(self._clock_ms())
            await asyncio.sleep(TICK_S)
        missing = sorted(set(step.engines) - set(step.ended))
        if missing:
            log.warning("run %s: no final report of %s from %s", self.run_id, step.spec.name, ", ".join(missing))
        await self._end_step(step)

    async def _end_step(self, step: _StepRun) -> None:
        self._window.close_step()
        await self._pipeline.published()
        if step.shares:
            step.shares.closed = True
        for agent_id in step.engines:
            self._registry.hold(agent_id, 0)
        window = self._window.step or step.window
        states = set(step.ended.values())
        state = (
            StepState.INTERRUPTED
            if self.state is RunState.INTERRUPTED
            else StepState.STOPPED
            if window.stopped
            else StepState.FAILED
            if states <= {JobState.FAILED}
            else StepState.FINISHED
        )
        measured = self._pipeline.meter.result(step.spec, window, state)
        demand = (
            measured.offered / measured.achieved_rps
            if self.plan.load.model is LoadModel.OPEN and measured.achieved_rps
            else 0.0
        )
        result = replace(
            self._pipeline.measure(
                step.spec, window, state, agents=len(step.engines), demand_ratio=demand, one_host=self._one_host()
            ),
            losses=self._losses.in_step(step.spec.name),
        )
        self._results.append(result)
        self._step = None
        self._pipeline.step_end(window, result, watermark_ms=self._window.watermark_ms, late=self._late)
        if self.plan.sweep:
            self._emit(Event(EventKind.STEP_FINISHED, result.describe()))
        if result.generator_bound:
            self._emit(Event(EventKind.GENERATOR_BOUND, result.generator_advice))
        sweep = self.plan.sweep
        if sweep and (step.spec.repetition == sweep.repeat or window.stopped):
            self._look_for_knee(step.spec.servers)

    def _one_host(self) -> bool:
        """Whether the run's agents share one host with each other or with loopback targets."""
        if len(self._hostnames) != 1:
            return False
        return len(self._agents) > 1 or any(is_loopback(t.url) for t in self.plan.targets)

    def _look_for_knee(self, servers: int) -> None:
        """Over the steps whose generators kept up (analysis.py)."""
        if servers in self._knees:
            return
        found = knee_search(self._results, servers)
        if found.knee is None:
            return
        self._knees[servers] = found.knee
        self._pipeline.record(Record.KNEE, servers=servers, knee=to_doc(found.knee))
        self._emit(Event(EventKind.KNEE, found.note))

    def _skip_past_knee(self, spec: StepSpec) -> None:
        self._skip([spec.name])
        if self._stop_reason is None:
            knee = self._knees[spec.servers]
            self._set_stop_reason(
                StopReason(Condition.KNEE, f"stop_at_knee: {knee.describe()}", knee.name, self._clock_ms())
            )

    def _skip(self, names: list[str]) -> None:
        self._skipped += names
        self._pipeline.record(Record.SKIPPED, steps=names)

    def _on_stop_condition(self, reason: StopReason) -> None:
        self._set_stop_reason(replace(reason, at_ms=self._clock_ms()))
        self._emit(Event(EventKind.STOP_CONDITION, f"step {reason.step}: {reason.text}; stopping the run"))
        self._halt_step()

    def _set_stop_reason(self, reason: StopReason) -> None:
        self._stop_reason = reason
        self._pipeline.record(Record.STOP, reason=to_doc(reason))

    def _halt_step(self) -> None:
        step = self._step
        if step is None or step.window.stopped:
            return
        step.window = step.window.halted(self._clock_ms())
        self._window.update_step(step.window)
        self._pipeline.record(Record.HALT, step=step.window.name, load_end_ms=step.window.load_end_ms)
        for agent_id in step.engines:
            record = self._registry.get(agent_id)
            if record and record.link:
                record.link.stop_job(step.window.job_id)

    # ---- the end -----------------------------------------------------------------

    async def _finish(self, message: str) -> RunSummary:
        if self._step is not None:  # the run failed or was interrupted in the middle of a step
            await self._end_step(self._step)
        await self._pipeline.published()
        if not self.state.ended:
            self.state = self._final_state()
        message = announcements.closing_message(
            message,
            failed=self.state is RunState.FAILED,
            abort=self._losses.abort,
            stop=self._stop_reason,
            results=self._results,
        )
        self.finished_ms = self._clock_ms()
        for agent_id in self._agents:
            record = self._registry.get(agent_id)
            if record and record.state is AgentState.BUSY:
                record.state = AgentState.IDLE
        self._emit(
            Event(EventKind.RUN_FINISHED, f"run {self.run_id} {self.state.value}" + (f": {message}" if message else ""))
        )
        self.summary = self._summarize(message)
        self.summary = await self._pipeline.finish(self.summary, self.state.value)
        return self.summary

    def _summarize(self, message: str) -> RunSummary:
        sweep = self.plan.sweep
        found = analyze(self._results, self.plan.load.model, server_sweep=bool(sweep.servers)) if sweep else None
        return summarize(
            run_id=self.run_id,
            plan_name=self.plan.name,
            state=self.state.value,
            message=message,
            run_dir=str(self.run_dir),
            started_ms=self._results[0].start_ms if self._results and self._results[0].start_ms else self.started_ms,
            totals=self._pipeline.totals,
            agent_ids=self.agent_ids,
            events=self.watchers.events,
            events_left_out=self.watchers.events_left_out,
            late_requests=dict(sorted(self._late.items())),
            steps=tuple(self._results),
            skipped_steps=tuple(self._skipped),
            knees=found.knees if found else tuple(self._knees.values()),
            **(
                {
                    "levels": found.levels,
                    "scalability": found.scalability,
                    "usl": found.usl,
                    "analysis_notes": found.notes,
                }
                if found
                else {}
            ),
            load_model=self.plan.load.model.value,
            stop=self._stop_reason,
            target_outages=self._pipeline.target_health.outages(),
            hosts=self._pipeline.hosts.run_loads(),
            controller=self._pipeline.controller_health.load(),
            losses=tuple(self._losses.losses),
            clock_offsets_ms=dict(sorted(self._clock_offsets_ms.items())),
        )

    def _final_state(self) -> RunState:
        if self._losses.abort or not (self._outcomes.get(JobState.FINISHED) or self._outcomes.get(JobState.STOPPED)):
            return RunState.FAILED
        return RunState.STOPPED if self._stop_requested or self._stop_reason else RunState.FINISHED

    # ---- publishing --------------------------------------------------------------

    def _publish(self, closed: ClosedInterval) -> None:
        self._pipeline.publish(closed, late=self._late)

    def _emit(self, event: Event) -> None:
        log.info("%s", self._pipeline.event(event).text)
