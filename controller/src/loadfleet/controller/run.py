"""One run of a plan: choose agents, then run its steps one after the other, finish.

Every step is a job of its own (`jobs.job_id_for`): the step's load is split over the
run's agents, each agent gets an assignment with a barrier start, and the step ends when
every agent has ended its job. A plan without a sweep has one step, `main`, whose job is
the run itself. While a step runs, its measured cluster intervals go through the stop
conditions and agents' heartbeats through the generator-saturation check; when it ends,
its figures are measured, the knee is looked for, and the next step starts.

A `Run` owns its aggregator, its events and its watchers. The RPC layer feeds it
decoded agent reports, job states and health; it sends assignments through the agents'
links. Watchers receive `IntervalUpdate`, `Event` and finally the `RunSummary`.
"""
from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import rundir, steps
from .admission import may_run
from .agents import AgentRecord, AgentRegistry, AgentState, Health
from .aggregate import RunAggregator
from .errors import NotEnoughAgents
from .events import Event, EventKind
from .figures import Figures, figures_of
from .drift import Drift
from .genbound import Saturation, is_loopback, saturation, verdict
from .hosts import HostRecorder, HostSample, MonitorInfo
from .jobs import JobAssignment, JobReport, JobState, job_id_for
from .knee import Knee, LevelPoint, find_knee
from .plan import Plan
from .scaling import server_scaling, usl_of
from .scheduler import DEFAULT_BARRIER_LEAD_MS, barrier_start_ms, split_over_engines
from .sinks import Sink
from .sinks.points import (agent_point, drift_point, event_point, host_points, http_points, step_host_points,
                           step_point)
from .steps import SINGLE_STEP, StepResult, StepSpec, level_summaries, measure, measured_intervals
from .stops import StopReason, StopWatch
from .targethealth import TargetHealth
from .summary import RunSummary, summarize

log = logging.getLogger(__name__)

# How long after an interval ends the controller waits for missing agent reports
# before publishing the interval without them (a late report revises it).
DEFAULT_GRACE_MS = 2500
# Extra time after the planned end for final reports before the run ends anyway.
FINISH_SLACK_MS = 10_000
TICK_S = 0.2
# Barrier lead of a sweep's later steps: the agents are connected and idle, and only
# need to start their engines.
STEP_BARRIER_LEAD_MS = 1000
# A JVM takes 3-8 s to start and warm up Gatling: its barrier is set further ahead.
GATLING_BARRIER_LEAD_MS = 10_000

__all__ = ["SINGLE_STEP", "IntervalUpdate", "Run", "RunState"]


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


@dataclass
class _StepRun:
    """The step being run: its job, its agents' shares and how their jobs ended."""

    spec: StepSpec
    job_id: str
    load_start_ms: int
    load_end_ms: int
    assigned: dict[str, JobAssignment] = field(default_factory=dict)
    ended: dict[str, JobState] = field(default_factory=dict)
    stopped: bool = False


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
        self._event_times: set[tuple[EventKind, int]] = set()
        self._watchers: set[asyncio.Queue] = set()
        self._aggregator = RunAggregator([])
        self._specs = steps.expand(plan)
        self._agents: list[AgentRecord] = []
        self._lost: set[str] = set()
        self._step: _StepRun | None = None
        self._job_steps: dict[str, StepSpec] = {}  # job id -> its step
        self._interval_steps: dict[int, str] = {}  # interval start -> step name
        self._outcomes: list[JobState] = []
        self._windows: list[tuple[int, int]] = []  # each step's load, [start, end) ms
        self._results: list[StepResult] = []
        self._saturations: list[Saturation] = []
        self._hosts = HostRecorder(period_ms=registry.heartbeat_ms)
        self._drift = Drift(plan.interval_ms)
        self._stopwatch = StopWatch(plan.stop, plan.interval_ms)
        self._target_health = TargetHealth([t.url for t in plan.targets], plan.interval_ms)
        self._stop_reason: StopReason | None = None
        self._knees: dict[int, Knee] = {}  # servers -> the knee found for them
        self._skipped: list[str] = []
        self._stop_requested = False

    @property
    def agent_ids(self) -> list[str]:
        return sorted(a.agent_id for a in self._agents)

    @property
    def total_requests(self) -> int:
        return self.summary.total.figures.requests if self.summary else 0

    # ---- driven by the controller -------------------------------------------------

    async def execute(self) -> RunSummary:
        message = ""
        try:
            self._agents = await self._choose_agents()
            rundir.write_plan(self.run_dir, self.plan.to_yaml())
            self.state = RunState.RUNNING
            if self.plan.sweep:
                self._emit(Event(EventKind.RUN_STARTED, self._sweep_description()))
            for i, spec in enumerate(self._specs):
                if self._stop_requested or (self._stop_reason and self._stop_reason.condition != "knee"):
                    self._skipped += [s.name for s in self._specs[i:]]
                    break
                if spec.servers in self._knees and self.plan.sweep.stop_at_knee:
                    self._skip_past_knee(spec)
                    continue
                await self._run_step(spec, first=i == 0)
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
        spec = self._job_steps.get(report.job_id)
        if spec is None or self.state.ended:
            return
        revised = self._aggregator.add(report.agent_id, report.interval_start_ms, report.rows)
        self._interval_steps[report.interval_start_ms] = spec.name
        if self._sinks:  # points carry percentiles, which cost CPU to compute
            self._to_sinks(http_points(run_id=self.run_id, step=spec.name, scope="agent",
                                       agent=report.agent_id, interval_start_ms=report.interval_start_ms,
                                       interval_ms=self.plan.interval_ms, rows=report.rows))
        if revised:
            self._publish_interval(report.interval_start_ms, revised=True)

    def on_job_state(self, agent_id: str, job_id: str, state: JobState, message: str) -> None:
        step = self._step
        if step is None or job_id != step.job_id or agent_id not in step.assigned or not state.ended:
            return
        if agent_id in step.ended:
            return
        step.ended[agent_id] = state
        self._outcomes.append(state)
        if state is JobState.FAILED:
            self._emit(Event(EventKind.JOB_FAILED, f"{agent_id}: {message}", agent_id))

    def on_health(self, agent_id: str, health: Health) -> None:
        step = self._step
        if (step is None or agent_id not in step.assigned or agent_id in step.ended
                or self.state is not RunState.RUNNING):
            return
        at_ms = self._clock_ms()
        sample = saturation(agent_id, health, len(step.assigned[agent_id].engines), at_ms)
        if sample:
            self._saturations.append(sample)
        self._to_sinks([agent_point(run_id=self.run_id, agent_id=agent_id, health=health, at_ms=at_ms,
                                    saturated=sample is not None)])

    def on_host(self, agent_id: str, monitor: MonitorInfo, sample: HostSample) -> None:
        """A monitor-only agent's heartbeat: its host's figures, kept while load runs."""
        if self.state is not RunState.RUNNING:
            return
        self._hosts.add(agent_id, monitor, sample)
        self._to_sinks(host_points(run_id=self.run_id, host=agent_id, monitor=monitor, sample=sample))

    def on_agent_lost(self, agent_id: str, reason: str) -> None:
        if agent_id not in self.agent_ids or agent_id in self._lost or self.state.ended:
            return
        self._lost.add(agent_id)
        step = self._step
        if step and agent_id in step.assigned and agent_id not in step.ended:
            step.ended[agent_id] = JobState.FAILED
            self._aggregator.drop_agent(agent_id)
        self._emit(Event(EventKind.AGENT_LOST, f"agent {agent_id} lost: {reason}; "
                         "the run continues with the remaining agents", agent_id))

    def stop(self) -> None:
        """Asks every agent to end its share now; the run then finishes normally."""
        if self._stop_requested or self.state.ended:
            return
        self._stop_requested = True
        self._emit(Event(EventKind.RUN_STOPPED, "stopped by request"))
        self._halt_step()

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
            idle = [r for r in self._registry.idle(selection.matches) if may_run(r, self.plan)]
            if len(idle) >= wanted:
                chosen = idle[:wanted] if selection.count else idle
                for record in chosen:  # held for every step of the run
                    record.state = AgentState.BUSY
                return chosen
            if time.monotonic() >= deadline or self._stop_requested:
                raise NotEnoughAgents(
                    f"needed {wanted} idle agent(s) matching {dict(selection.labels) or 'any labels'}, "
                    f"found {len(idle)} after {selection.wait_s:g} s")
            await self._registry.wait_changed(min(0.5, max(0.0, deadline - time.monotonic())))

    async def _run_step(self, spec: StepSpec, *, first: bool) -> None:
        agents = [a for a in self._agents if a.agent_id not in self._lost and a.link]
        if not agents:
            raise NotEnoughAgents(f"no agent of the run is left for step {spec.name}")
        plan = steps.step_plan(self.plan, spec)
        shares = split_over_engines(plan.load, plan.max_requests, [(a.agent_id, a.identity.cores) for a in agents])
        lead_ms = DEFAULT_BARRIER_LEAD_MS if first else STEP_BARRIER_LEAD_MS
        if plan.driver == "gatling":
            lead_ms = max(lead_ms, GATLING_BARRIER_LEAD_MS)
        load_start = barrier_start_ms(self._clock_ms(), plan.interval_ms, lead_ms)
        step = _StepRun(spec, job_id_for(self.run_id, spec.name, single=self.plan.sweep is None),
                        load_start, load_start + int(plan.duration_s * 1000))
        self._job_steps[step.job_id] = spec
        self._aggregator.expect(s.agent_id for s in shares)
        self._stopwatch.reset()
        self._target_health.step_started(spec.name, plan.load.describe())
        self._step = step
        for share in shares:
            assignment = JobAssignment(job_id=step.job_id, plan=plan, engines=share.engines, start_at_ms=load_start)
            step.assigned[share.agent_id] = assignment
            self._registry.get(share.agent_id).link.assign(assignment)
        split = ", ".join(f"{s.agent_id}: {s.load.describe()}" for s in shares)
        if self.plan.sweep:
            self._emit(Event(EventKind.STEP_STARTED, f"step {spec.name}: {plan.load.describe()} on "
                             f"{spec.servers} server(s) for {plan.duration_s:g} s ({split})"))
        else:
            budget = f", {plan.max_requests} requests at most" if plan.max_requests else ""
            self._emit(Event(EventKind.RUN_STARTED,
                             f"run {self.run_id}: {plan.load.describe()} on {len(shares)} agent(s) "
                             f"({split}) for {plan.duration_s:g} s{budget}"))
        await self._collect(step)
        self._publish_due(2**62)
        self._end_step(step)

    async def _collect(self, step: _StepRun) -> None:
        deadline_ms = step.load_end_ms + self.plan.request_timeout_ms + FINISH_SLACK_MS
        while len(step.ended) < len(step.assigned) and self._clock_ms() < deadline_ms:
            self._publish_due(self._clock_ms())
            await asyncio.sleep(TICK_S)
        missing = sorted(set(step.assigned) - set(step.ended))
        if missing:
            log.warning("run %s: no final report of %s from %s", self.run_id, step.spec.name, ", ".join(missing))

    def _end_step(self, step: _StepRun) -> None:
        sweep = self.plan.sweep
        warmup_s = sweep.warmup_s if sweep else 0.0
        cooldown_ms = self.plan.interval_ms if sweep and not step.stopped else 0
        starts = measured_intervals(self._aggregator, step.load_start_ms, step.load_end_ms, warmup_s, cooldown_ms)
        self._windows.append((step.load_start_ms, step.load_end_ms))
        states = set(step.ended.values())
        state = ("stopped" if step.stopped else
                 "failed" if states <= {JobState.FAILED} else "finished")
        result = measure(step.spec, state=state, aggregator=self._aggregator, starts=starts,
                         load_end_ms=step.load_end_ms, interval_ms=self.plan.interval_ms)
        demand = result.offered / result.achieved_rps if self.plan.load.model == "open" and result.achieved_rps else 0.0
        found = verdict(self._saturations, starts, self.plan.interval_ms, len(step.assigned), demand)
        if starts:
            result = replace(result, hosts=self._hosts.loads(starts[0], starts[-1] + self.plan.interval_ms))
        if found.bound:
            result = replace(result, generator_bound=True, generator_bound_intervals=found.intervals,
                             generator_advice=found.describe(step.spec.name, len(starts),
                                                             one_host=self._one_host()))
        self._results.append(result)
        self._step = None
        if sweep:
            self._emit(Event(EventKind.STEP_FINISHED, result.describe()))
        if result.generator_bound:
            self._emit(Event(EventKind.GENERATOR_BOUND, result.generator_advice))
        self._to_sinks([step_point(
            run_id=self.run_id, step=result.name, servers=result.servers, offered=result.offered,
            start_ms=result.start_ms or step.load_start_ms, total=result.figures(),
            bytes_per_s=result.bytes_per_s, generator_bound=result.generator_bound)])
        self._to_sinks(step_host_points(run_id=self.run_id, step=result.name, servers=result.servers,
                                        offered=result.offered, start_ms=result.start_ms or step.load_start_ms,
                                        hosts=result.hosts))
        if sweep and (step.spec.repetition == sweep.repeat or step.stopped):
            self._look_for_knee(step.spec.servers)

    def _one_host(self) -> bool:
        """Whether the run's agents share one host with each other or with loopback targets."""
        if len({a.identity.hostname for a in self._agents}) != 1:
            return False
        return len(self._agents) > 1 or any(is_loopback(t.url) for t in self.plan.targets)

    def _look_for_knee(self, servers: int) -> None:
        if servers in self._knees:
            return
        levels = [lv for lv in level_summaries(self._results) if lv.servers == servers]
        knee = find_knee([LevelPoint(lv.name, lv.offered, lv.ok_rps.mean, lv.p99_ms.mean, lv.error_pct.mean)
                          for lv in levels])
        if knee is None:
            return
        self._knees[servers] = knee
        bound = " (the step was generator-bound: this may be the generators' knee)" if levels[knee.index].generator_bound else ""
        self._emit(Event(EventKind.KNEE, knee.describe() + bound))

    def _skip_past_knee(self, spec: StepSpec) -> None:
        self._skipped.append(spec.name)
        if self._stop_reason is None:
            knee = self._knees[spec.servers]
            self._stop_reason = StopReason("knee", f"stop_at_knee: {knee.describe()}", knee.name, self._clock_ms())

    def _halt_step(self) -> None:
        step = self._step
        if step is None or step.stopped:
            return
        step.stopped = True
        step.load_end_ms = min(step.load_end_ms, max(step.load_start_ms, self._clock_ms()))
        for agent_id in step.assigned:
            record = self._registry.get(agent_id)
            if record and record.link:
                record.link.stop_job(step.job_id)

    def _finish(self, message: str) -> RunSummary:
        self._publish_due(2**62)
        if not self.state.ended:
            self.state = self._final_state()
        if not message and self.state is RunState.FAILED:
            message = "no agent finished its share"
        if not message and self._stop_reason:
            message = f"stopped by a stop condition: {self._stop_reason.text}"
        failed_steps = [r.name for r in self._results if r.state == "failed"]
        if failed_steps and self.state is not RunState.FAILED:
            # The run goes on past a step no agent finished, but its figures are missing or partial.
            message = "; ".join(filter(None, [message, f"step(s) {', '.join(failed_steps)} failed: "
                                                       "no agent finished its share"]))
        self.finished_ms = self._clock_ms()
        for record in self._agents:
            if record.state is AgentState.BUSY:
                record.state = AgentState.IDLE
        self._emit(Event(EventKind.RUN_FINISHED, f"run {self.run_id} {self.state.value}"
                         + (f": {message}" if message else "")))
        levels = level_summaries(self._results) if self.plan.sweep else []
        self.summary = summarize(
            run_id=self.run_id, plan_name=self.plan.name, state=self.state.value, message=message,
            run_dir=str(self.run_dir), started_ms=self._windows[0][0] if self._windows else self.started_ms,
            duration_s=self._measured_seconds(), aggregator=self._aggregator,
            agent_ids=self.agent_ids, events=self._events,
            steps=tuple(self._results), levels=tuple(levels), knees=tuple(self._knees.values()),
            skipped_steps=tuple(self._skipped),
            scalability=tuple(server_scaling(levels)) if self.plan.sweep and self.plan.sweep.servers else (),
            usl=usl_of(levels, self.plan.load.model) if levels else None, stop=self._stop_reason,
            target_outages=self._target_health.outages(),
            hosts=self._hosts.loads(self._windows[0][0], self._windows[-1][1]) if self._windows else (),
        )
        if self._windows:
            rundir.write_atomic(self.run_dir / "steps.csv",
                                steps.steps_csv(self._results, [t.url for t in self.plan.targets]))
            rundir.write_results(self.run_dir, self.summary, self._aggregator, self.plan.interval_ms)
        if self._hosts.samples:
            rundir.write_atomic(self.run_dir / "hosts.csv", self._hosts.csv())
        if self._hosts.has_counters():
            rundir.write_atomic(self.run_dir / "host_counters.csv", self._hosts.counters_csv())
        for queue in self._watchers:
            queue.put_nowait(self.summary)
            queue.put_nowait(None)
        self._watchers.clear()
        return self.summary

    def _final_state(self) -> RunState:
        if not any(state is JobState.FINISHED or state is JobState.STOPPED for state in self._outcomes):
            return RunState.FAILED
        return RunState.STOPPED if self._stop_requested or self._stop_reason else RunState.FINISHED

    def _measured_seconds(self) -> float:
        """Seconds covered by the intervals that hold data, step by step (the whole planned
        duration for a full run; less when stopped early)."""
        intervals = self._aggregator.intervals()
        total = 0.0
        for start, end in self._windows:
            inside = [s for s in intervals if start <= s < end]
            if inside:
                total += (min(inside[-1] + self.plan.interval_ms, end) - inside[0]) / 1000
        return max(0.001, total) if intervals else 0.0

    def _sweep_description(self) -> str:
        sweep = self.plan.sweep
        level = {"closed": "clients", "open": "requests/s", "users": "users"}[self.plan.load.model]
        servers = f" on {', '.join(map(str, sweep.servers))} server(s)" if sweep.servers else ""
        repeat = f", each {sweep.repeat} times" if sweep.repeat > 1 else ""
        return (f"run {self.run_id}: sweep of {sweep.total_steps} steps of {sweep.step_s:g} s "
                f"({', '.join(f'{v:g}' for v in sweep.levels)} {level}{servers}{repeat}; "
                f"warm-up {sweep.warmup_s:g} s) on {len(self._agents)} agent(s)")

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
            self._to_sinks(http_points(run_id=self.run_id, step=self._interval_steps.get(start, SINGLE_STEP),
                                       scope="cluster", agent="", interval_start_ms=start,
                                       interval_ms=self.plan.interval_ms, rows=self._aggregator.rows_in(start)))
            drift = None if revised else self._drift.observe(start, total)
            if drift:
                self._to_sinks([drift_point(run_id=self.run_id, drift=drift)])
        for event in self._target_health.observe(start, self._aggregator.rows_in(start)):
            self._emit(event)
        if not revised:
            self._check_stop(start, total)

    def _check_stop(self, start: int, total) -> None:
        step = self._step
        warmup_ms = round(self.plan.sweep.warmup_s * 1000) if self.plan.sweep else 0
        if (step is None or self._stop_reason or self.plan.stop is None
                or not step.load_start_ms + warmup_ms <= start < step.load_end_ms - self.plan.interval_ms * bool(self.plan.sweep)):
            return
        reason = self._stopwatch.observe(total)
        if reason:
            self._stop_reason = replace(reason, step=step.spec.name, at_ms=self._clock_ms())
            self._emit(Event(EventKind.STOP_CONDITION, f"step {step.spec.name}: {reason.text}; stopping the run"))
            self._halt_step()

    def _to_sinks(self, points) -> None:
        for sink in self._sinks:
            sink.add(points)

    def _emit(self, event: Event) -> None:
        # InfluxDB keeps one `event` point per (run, kind, time): two agents lost or two targets
        # down in the same millisecond would be one. Later ones move on by a millisecond.
        while (event.kind, event.at_ms) in self._event_times:
            event = replace(event, at_ms=event.at_ms + 1)
        self._event_times.add((event.kind, event.at_ms))
        log.info("%s", event.text)
        self._events.append(event)
        for queue in self._watchers:
            queue.put_nowait(event)
        self._to_sinks([event_point(run_id=self.run_id, event=event)])

