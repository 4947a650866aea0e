"""One run of a plan: choose agents, run its steps one after the other (its course,
course.py; each step, stepping.py), finish.

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

import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from loadfleet.controller.analysis.progress import RunProgress
from loadfleet.controller.analysis.stops import Condition, StopReason
from loadfleet.controller.analysis.summary import RunSummary, summarize_run
from loadfleet.controller.fleet.agents import AgentRecord, AgentRegistry, AgentState
from loadfleet.controller.fleet.jobs import EngineFailure, JobReport, JobState, ReportLimits
from loadfleet.controller.fleet.spooldrops import AgentSpoolDrop, agent_drop_event
from loadfleet.controller.model.errors import NotEnoughAgents
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo
from loadfleet.controller.model.runstate import RunState
from loadfleet.controller.model.selfsample import ControllerSample
from loadfleet.controller.output.rundisk import DiskTrouble
from loadfleet.controller.output.sinks import Sink
from loadfleet.controller.output.watchers import Follower, Watchers
from loadfleet.controller.plan import steps
from loadfleet.controller.plan.model import Plan
from loadfleet.controller.plan.steps import SINGLE_STEP
from loadfleet.controller.run import announcements
from loadfleet.controller.run.admission import choose_agents
from loadfleet.controller.run.course import Course, Turn, final_state
from loadfleet.controller.run.pipeline import RunPipeline
from loadfleet.controller.run.records import StepsSkipped, StopDecided
from loadfleet.controller.run.stepping import StepRunner

log = logging.getLogger(__name__)

# How long after an interval ends the controller waits for missing agent reports before
# publishing the interval without them (at least; a job's lease, if longer, counts).
DEFAULT_GRACE_MS = 2500
# An agent's clock off the controller's by more than this is an event (its times are converted).
CLOCK_OFFSET_LIMIT_MS = 100

__all__ = ["SINGLE_STEP", "Run", "RunState"]


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
        progress: RunProgress | None = None,
    ):
        self.run_id = run_id
        self.plan = plan
        self.run_dir = run_dir
        self.state = RunState.STARTING
        self.started_ms = clock_ms()
        self.finished_ms = 0
        self.summary: RunSummary | None = None
        self.sinks = list(sinks)
        self._registry = registry
        self._clock_ms = clock_ms
        self._progress = progress or RunProgress()
        self._course = Course(steps.expand(plan), plan.sweep, self._progress)
        self._lost: set[str] = set()
        self._stop_requested = False
        self._pipeline = RunPipeline(
            run_id,
            plan,
            run_dir,
            heartbeat_ms=registry.heartbeat_ms,
            sinks=self.sinks,
            on_stop=self._on_stop_condition,
            settle=settle,
        )
        self._steps = StepRunner(
            run_id,
            plan,
            registry,
            self._pipeline,
            self._progress,
            self._course,
            # While a job runs, agents keep its load this long without word from the controller.
            lease_s=max(plan.agents.lease_s, lease_ms / 1000),
            revision_ms=max(grace_ms, round(plan.agents.lease_s * 1000) or lease_ms),
            clock_ms=clock_ms,
            emit=self._emit,
        )

    @property
    def agent_ids(self) -> list[str]:
        return sorted(self._progress.agents)

    @property
    def plan_name(self) -> str:
        return self.plan.name

    def report_limits(self, agent_id: str, job_id: str) -> ReportLimits | None:
        """What `agent_id` may report for `job_id`; None when that is no job of this agent."""
        return self._steps.report_limits(agent_id, job_id)

    @property
    def closed_before_ms(self) -> int:
        """Reports of intervals that start before this are no longer merged (window.py)."""
        return self._steps.window.watermark_ms

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
        progress = self._progress
        progress.hostnames = {r.identity.hostname for r in chosen}
        progress.agents = [r.agent_id for r in chosen]
        progress.clock_offsets_ms = {r.agent_id: r.clock.offset_ms for r in chosen if r.clock}
        self._pipeline.start(
            agents=progress.agents, hostnames=sorted(progress.hostnames), clock_offsets_ms=progress.clock_offsets_ms
        )
        self.state = RunState.RUNNING
        for r in chosen:
            if r.clock and abs(r.clock.offset_ms) > CLOCK_OFFSET_LIMIT_MS:
                self._emit(announcements.clock_offset(r.agent_id, r.clock))
        if self.plan.sweep:
            self._emit(
                Event(EventKind.RUN_STARTED, announcements.sweep_started(self.run_id, self.plan, len(progress.agents)))
            )
        await self._run_steps()
        return ""

    async def _conclude(self, course: Coroutine[Any, Any, str]) -> RunSummary:
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
        self._steps.on_report(report)

    def on_job_state(self, agent_id: str, job_id: str, state: JobState, message: str) -> None:
        self._steps.on_job_state(agent_id, job_id, state, message)

    def on_health(self, agent_id: str, health: Health) -> None:
        if self.state is RunState.RUNNING:
            self._steps.on_health(agent_id, health)

    def on_host(self, agent_id: str, monitor: MonitorInfo, sample: HostSample) -> None:
        if self.state is RunState.RUNNING:
            self._steps.on_host(agent_id, monitor, sample)

    def on_controller(self, sample: ControllerSample) -> None:
        """The controller's own health (selfwatch.py), while this run has its agents."""
        if self._pipeline.open and not self.state.ended:
            self._pipeline.controller(sample)

    def on_agent_lost(self, agent_id: str, reason: str, *, silent_s: float = 0.0) -> None:
        """`silent_s`: how long ago it was last heard (its lease runs from then)."""
        if agent_id not in self._progress.agents or agent_id in self._lost or self.state.ended:
            return
        self._lost.add(agent_id)
        self._emit(Event(EventKind.AGENT_LOST, f"agent {agent_id} lost: {reason}", agent_id))
        self._steps.agent_lost(agent_id, silent_s=silent_s)

    def on_agent_late(self, agent_id: str, reason: str) -> None:
        if not self.state.ended:
            self._steps.on_agent_late(agent_id, reason)

    def on_agent_back(self, agent_id: str) -> None:
        if not self.state.ended:
            self._steps.losses.back(agent_id)

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
        if not self.state.ended:
            self._steps.on_engine_failure(failure)

    def on_spool_dropped(self, agent_id: str, drop: AgentSpoolDrop) -> None:
        """An agent's spool dropped messages of a job (spooldrops.py): an event, and the
        reports dropped are waited for no longer."""
        if not self.state.ended:
            self._steps.on_spool_dropped(agent_id, drop)
            self._emit(agent_drop_event(agent_id, drop))

    def stop(self) -> None:
        """Asks every agent to end its share now; the run then finishes normally."""
        if self._stop_requested or self.state.ended:
            return
        self._stop_requested = True
        self._emit(Event(EventKind.RUN_STOPPED, "stopped by request"))
        self._steps.halt()

    def follow(self) -> Follower:
        """A follower of this run's updates: past events first, then live ones, then the summary."""
        return self._pipeline.watchers.follow()

    # ---- its course ----------------------------------------------------------------

    async def _run_steps(self) -> None:
        """The steps left, one after the other, as the course says."""
        while turn := self._course.next(halted=self._halted(), now_ms=self._clock_ms()):
            self._journal(turn)
            if turn.spec:
                agents = [
                    r for a in self._progress.agents if a not in self._lost and (r := self._registry.get(a)) and r.link
                ]
                if not agents:
                    raise NotEnoughAgents(f"no agent of the run is left for step {turn.spec.name}")
                await self._steps.run(turn.spec, agents, first=not self._progress.results)

    def _halted(self) -> bool:
        """Asked to stop, or lost more than the plan's loss policy allows."""
        return self._stop_requested or bool(self._steps.losses.abort)

    def _skip_the_rest(self) -> list[str]:
        """Every step left is skipped (and journaled); their names."""
        turn = self._course.skip_all()
        self._journal(turn)
        return list(turn.skipped)

    def _journal(self, turn: Turn) -> None:
        """What the course decided, in the journal (a restarted controller goes on from it)."""
        if turn.skipped:
            self._pipeline.record(StepsSkipped(turn.skipped))
        if turn.stop:
            self._pipeline.record(StopDecided(turn.stop))

    def _on_stop_condition(self, reason: StopReason) -> None:
        if self._progress.stop is not None:  # a stop condition and a threshold's abort in one interval: the first
            return
        self._progress.stop = replace(reason, at_ms=self._clock_ms())
        self._pipeline.record(StopDecided(self._progress.stop))
        if reason.condition is not Condition.THRESHOLD:  # the threshold watch told it (THRESHOLD_ABORT)
            self._emit(Event(EventKind.STOP_CONDITION, f"step {reason.step}: {reason.text}; stopping the run"))
        self._steps.halt()

    # ---- the end -----------------------------------------------------------------

    async def _finish(self, message: str) -> RunSummary:
        if self._steps.current is not None:  # the run failed or was interrupted in the middle of a step
            await self._steps.end(interrupted=self.state is RunState.INTERRUPTED)
        await self._pipeline.published()
        progress = self._progress
        if not self.state.ended:
            self.state = final_state(
                abort=bool(self._steps.losses.abort),
                stop_requested=self._stop_requested,
                stop=progress.stop,
                outcomes=self._steps.outcomes,
            )
        message = announcements.closing_message(
            message,
            failed=self.state is RunState.FAILED,
            abort=self._steps.losses.abort,
            stop=progress.stop,
            results=progress.results,
        )
        self.finished_ms = self._clock_ms()
        for agent_id in progress.agents:
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
        thresholds = self._pipeline.thresholds.results()
        return summarize_run(
            self._progress,
            self.plan,
            run_id=self.run_id,
            state=self.state.value,
            message=message,
            run_dir=str(self.run_dir),
            started_ms=self.started_ms,
            totals=self._pipeline.totals,
            events=self.watchers.events,
            events_left_out=self.watchers.events_left_out,
            target_outages=self._pipeline.target_health.outages(),
            hosts=self._pipeline.hosts.run_loads(),
            controller=self._pipeline.controller_health.load(),
            thresholds=thresholds,
            verdict=self._pipeline.thresholds.verdict(thresholds),
        )

    def _emit(self, event: Event) -> None:
        log.info("%s", self._pipeline.event(event).text)
