"""The controller's state: the agent registry and the runs, and the tasks that keep
them moving. The RPC servicers are thin adapters over this object.

Memory: running runs hold O(agents × rows + steps) each (run.py); an ended run is kept
as its summary only, and only the latest `KEPT_ENDED_RUNS` of them (the rest are on disk
in their run directories).

An agent's session may only touch its own jobs' runs: every message addressed to a job
(reports, job states, engine failures, spool drops, artifacts) goes to its run only when
`job_run` finds that job is the agent's, in a run still open. Monitored hosts' samples are
taken at most once per agent per heartbeat period (`host_samples`), and what an agent stores
in a run's directory is bounded by its `ArtifactBudget` there."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from loadfleet.controller.analysis.hosts import HostSampleGate
from loadfleet.controller.analysis.selfwatch import LoopProbe, StallStacks
from loadfleet.controller.fleet.agents import (
    AgentRecord,
    AgentRegistry,
    AgentState,
    ClockOffset,
)
from loadfleet.controller.fleet.jobs import EngineFailure, JobReport, JobState, ReportLimits, run_id_of
from loadfleet.controller.fleet.spooldrops import AgentSpoolDrop, agent_drop_event
from loadfleet.controller.model.errors import LoadfleetError, RunNotFound
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import HostSample
from loadfleet.controller.model.selfsample import ControllerSample
from loadfleet.controller.output.artifacts import ArtifactBudget, discard_partials, store_artifact_chunk
from loadfleet.controller.output.report.rundata import GATLING_DIR
from loadfleet.controller.output.sinks import Sink
from loadfleet.controller.output.sinks.influx import DEFAULT_SPOOL_LIMIT_MB, InfluxConfig, InfluxSink, influx_writer
from loadfleet.controller.output.sinks.spool import SpoolBusy
from loadfleet.controller.plan.model import Plan
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.run.admission import admit, influx_config
from loadfleet.controller.run.recovery import ADOPT_SLACK_S, adoptable, interrupted_runs, recover
from loadfleet.controller.run.run import Run
from loadfleet.controller.run.takeover import TakenOverRun
from loadfleet.controller.service.endedrun import EndedRun
from loadfleet.wire import DEFAULT_HEARTBEAT_MS, DEFAULT_LEASE_MS

log = logging.getLogger(__name__)

DEFAULT_RUNS_DIR = Path("runs")
# A wake of the loop probe this late means the controller itself was stopped or starved.
STALL_S = 1.0
# How long closing the controller waits for runs to write their results and flush sinks.
CLOSE_TIMEOUT_S = 30.0
# Ended runs whose summaries stay in memory (for `loadfleet runs`, `status`).
KEPT_ENDED_RUNS = 100


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class Controller:
    def __init__(
        self,
        *,
        runs_dir: Path = DEFAULT_RUNS_DIR,
        heartbeat_ms: int = DEFAULT_HEARTBEAT_MS,
        lease_ms: int = DEFAULT_LEASE_MS,
        influx: InfluxConfig | None = None,
        allow_plan_influx: bool = False,
        influx_spool_limit_mb: float = DEFAULT_SPOOL_LIMIT_MB,
    ):
        self.runs_dir = runs_dir
        self.influx = influx
        self.influx_spool_limit_mb = influx_spool_limit_mb
        self.allow_plan_influx = allow_plan_influx  # plans may name their InfluxDB (admission.py)
        self.heartbeat_ms = heartbeat_ms
        self.lease_ms = lease_ms
        self.registry = AgentRegistry(
            heartbeat_ms=heartbeat_ms,
            on_joined=self._joined,
            on_lost=self._lost,
            on_late=self._late,
            on_back=self._back,
        )
        # This process: agents' jobs belong to it (agent.proto, Ownership).
        self.instance_id = secrets.token_hex(8)
        self._runs: dict[str, Run | EndedRun] = {}
        # Monitored hosts' samples, at most one per agent per heartbeat period (hosts.py).
        self.host_samples = HostSampleGate(heartbeat_ms / 1000)
        # (run id, agent id) -> what the agent may still store in that open run: O(agents of open runs).
        self._artifact_budgets: dict[tuple[str, str], ArtifactBudget] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._probe: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Takes over or closes the runs an earlier controller left (before any agent can
        connect), then watches agents and its own event loop."""
        self._recover_runs()
        probe = LoopProbe(
            self._on_self_sample, agents=self.registry.connected, on_wake=self._judge_agents, stacks=StallStacks()
        )
        self._probe = asyncio.create_task(probe.run(), name="loop-probe")

    def _recover_runs(self) -> None:
        for run_dir in interrupted_runs(self.runs_dir):
            try:
                recovered = recover(run_dir)
                plan = parse_plan((run_dir / "plan.yaml").read_text())
            except (OSError, ValueError, LoadfleetError) as exc:
                log.error("%s: cannot read the run back (%s); it stays as it is", run_dir, exc)
                continue
            run = TakenOverRun(
                run_dir.name,
                plan,
                run_dir,
                self.registry,
                recovered,
                sinks=self._sinks_for(plan, run_dir.name),
                lease_ms=self.lease_ms,
                settle=self.settle,
            )
            self._runs[run.run_id] = run
            lease_s = max(self.lease_ms / 1000, plan.agents.lease_s)
            if adoptable(recovered, lease_s):
                log.warning(
                    "run %s: taking it over from its journal; its agents have %.0f s to reconnect",
                    run.run_id,
                    lease_s + ADOPT_SLACK_S,
                )
                self._spawn(run, run.go_on(lease_s + ADOPT_SLACK_S))
            else:
                log.warning("run %s: closed as interrupted (the controller stopped during it)", run.run_id)
                self._spawn(
                    run,
                    run.close_interrupted(
                        "the controller stopped during the run; the run directory holds every interval published before"
                    ),
                )

    def adopted_jobs(self, agent_id: str, job_ids: list[str]) -> list[str]:
        """Of an agent's running jobs (Hello.running_jobs), those this controller collects:
        jobs of runs it took over after a restart. The agent is held busy for them."""
        adopted = [
            job_id
            for job_id in job_ids
            if isinstance(run := self._runs.get(run_id_of(job_id)), TakenOverRun) and run.adopts(agent_id, job_id)
        ]
        record = self.registry.get(agent_id)
        if adopted and record:
            record.state = AgentState.BUSY
        return adopted

    async def close(self) -> None:
        """Stops running runs, lets them write results and flush their sinks, then
        stops background tasks; safe to call twice."""
        for run in self._running():
            run.stop()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=CLOSE_TIMEOUT_S)
        tasks = [t for t in (self._probe, *self._tasks) if t]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._probe = None
        self._tasks.clear()
        self.registry.close_sessions()

    # ---- runs --------------------------------------------------------------------

    def start_run(self, plan_yaml: str) -> Run:
        """Validates the plan (PlanError lists every problem) and starts the run."""
        plan = parse_plan(plan_yaml)
        admit(plan, self.registry, allow_plan_influx=self.allow_plan_influx)
        run_id = new_run_id()
        run = Run(
            run_id,
            plan,
            self.runs_dir / run_id,
            self.registry,
            sinks=self._sinks_for(plan, run_id),
            lease_ms=self.lease_ms,
            settle=self.settle,
        )
        self._runs[run_id] = run
        self._spawn(run, run.execute())
        return run

    def _spawn(self, run: Run, work: Coroutine[Any, Any, object]) -> None:
        task = asyncio.create_task(self._until_ended(run, work), name=f"run-{run.run_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _until_ended(self, run: Run, work: Coroutine[Any, Any, object]) -> None:
        try:
            await work
        finally:
            self._runs[run.run_id] = EndedRun.of(run)
            self._close_artifacts(run)
            ended = [r for r in self._runs.values() if isinstance(r, EndedRun)]
            for old in ended[:-KEPT_ENDED_RUNS]:
                del self._runs[old.run_id]

    def _close_artifacts(self, run: Run) -> None:
        """The run is closed: its agents' budgets go, and so do the partial files of
        artifacts whose last chunk never came."""
        for key in [k for k in self._artifact_budgets if k[0] == run.run_id]:
            del self._artifact_budgets[key]
        try:
            discard_partials(run.run_dir)
        except OSError as exc:
            log.warning("run %s: partial artifacts not removed: %s", run.run_id, exc)

    def _sinks_for(self, plan: Plan, run_id: str) -> list[Sink]:
        """The plan's InfluxDB if it names one, else the controller's, else none. Each run
        has its own spool (sinks/spool.py), beside those of other runs to the same InfluxDB,
        which it sends first if their runs ended with points left."""
        config = influx_config(plan, self.influx)
        if config is None:
            return []
        slug = hashlib.sha256(f"{config.url} {config.org} {config.bucket}".encode()).hexdigest()[:12]
        try:
            sink = InfluxSink(
                influx_writer(config),
                self.runs_dir / ".spool" / f"influx-{slug}" / run_id,
                spool_limit_bytes=int(self.influx_spool_limit_mb * 2**20),
                adopt_orphans=True,
                description=f"InfluxDB {config.url} ({config.bucket})",
            )
        except (SpoolBusy, OSError) as exc:
            log.error("run %s: no InfluxDB: its spool is unusable (%s)", run_id, exc)
            return []
        sink.start()
        return [sink]

    def get_run(self, run_id: str) -> Run | EndedRun:
        try:
            return self._runs[run_id]
        except KeyError:
            raise RunNotFound(f"no run {run_id!r} on this controller") from None

    def runs(self) -> list[Run | EndedRun]:
        return sorted(self._runs.values(), key=lambda r: r.started_ms)

    def _running(self) -> list[Run]:
        return [r for r in self._runs.values() if isinstance(r, Run)]

    # ---- from agents -------------------------------------------------------------

    def job_run(self, agent_id: str, job_id: str) -> Run | None:
        """The run of `job_id` when that is a job of `agent_id` (the run chose the agent and
        started the job) and the run is still open; else None. The one check every message
        an agent addresses to a job passes: a session may only touch its own jobs' runs. A
        job that ended still counts while its run is open (a spool drop may come after it)."""
        run = self._runs.get(run_id_of(job_id))
        if isinstance(run, Run) and run.report_limits(agent_id, job_id) is not None:
            return run
        return None

    def report_limits(self, agent_id: str, job_id: str) -> ReportLimits | None:
        """What the agent may report for the job; None when it is no running job of that agent."""
        run = self._runs.get(run_id_of(job_id))
        return run.report_limits(agent_id, job_id) if isinstance(run, Run) else None

    def report_closed(self, job_id: str, interval_start_ms: int) -> bool:
        """Whether the run no longer merges reports of that interval (late, or a resend)."""
        run = self._runs.get(run_id_of(job_id))
        return isinstance(run, Run) and interval_start_ms < run.closed_before_ms

    def on_report(self, report: JobReport) -> None:
        run = self.job_run(report.agent_id, report.job_id)
        if run is not None:
            run.on_report(report)
        else:
            self.settle(report.agent_id, report.seq)

    def settle(self, agent_id: str, seq: int) -> None:
        """The agent's message `seq` is stored for good (or deliberately dropped): its
        session may acknowledge it."""
        record = self.registry.get(agent_id)
        if record and record.link:
            record.link.settle(seq)

    def on_heartbeat(
        self, agent_id: str, health: Health, host: HostSample | None = None, clock: ClockOffset | None = None
    ) -> None:
        """`host`: a monitor's sample, admitted by `host_samples` (asked before it is decoded).
        Every running run takes every monitor's samples while its load runs."""
        self.registry.seen(agent_id, health, clock)
        record = self.registry.get(agent_id)
        monitor = record.identity.monitor if record else None
        for run in self._running():
            if monitor and host:
                run.on_host(agent_id, monitor, host)
            else:
                run.on_health(agent_id, health)

    def _on_self_sample(self, sample: ControllerSample) -> None:
        for run in self._running():
            run.on_controller(sample)

    def on_spool_dropped(self, agent_id: str, drop: AgentSpoolDrop) -> None:
        """An agent dropped unsent messages of a job from its spool: the job's run says so."""
        run = self.job_run(agent_id, drop.job_id)
        if run is not None:
            run.on_spool_dropped(agent_id, drop)
        else:
            log.warning("%s (job %r, no job of its in an open run)", agent_drop_event(agent_id, drop).text, drop.job_id)

    def on_job_state(self, agent_id: str, job_id: str, state: JobState, message: str) -> None:
        run = self.job_run(agent_id, job_id)
        if run is not None:
            run.on_job_state(agent_id, job_id, state, message)

    def on_engine_failure(self, failure: EngineFailure) -> None:
        run = self.job_run(failure.agent_id, failure.job_id)
        if run is not None:
            run.on_engine_failure(failure)

    def on_artifact(self, agent_id: str, job_id: str, name: str, data: bytes, *, last: bool) -> Path | None:
        """A chunk of a file for the job's run directory (artifacts.store_artifact_chunk), within
        the agent's budget in that run; the directory it was unpacked into after the last.
        Raises ValueError when it is refused (no job of the agent in an open run, a name, a
        bound), OSError when the disk cannot take it (the run's summary then says so)."""
        run = self.job_run(agent_id, job_id)
        if run is None:
            raise ValueError(f"job {job_id[:80]!r} is no job of agent {agent_id} in an open run")
        budget = self._artifact_budgets.setdefault((run.run_id, agent_id), ArtifactBudget())
        try:
            return store_artifact_chunk(run.run_dir, agent_id, name, data, last=last, budget=budget)
        except OSError as exc:
            run.disk.failed(f"{GATLING_DIR}/{agent_id}", exc)
            raise

    def _joined(self, record: AgentRecord) -> None:
        log.info("agent %s joined (%s, %d cores)", record.agent_id, record.identity.hostname, record.identity.cores)
        for run in self._running():
            run.on_agent_joined(record)

    def _late(self, record: AgentRecord, reason: str) -> None:
        log.warning("agent %s late: %s", record.agent_id, reason)
        for run in self._running():
            run.on_agent_late(record.agent_id, reason)

    def _back(self, record: AgentRecord) -> None:
        log.info("agent %s back", record.agent_id)
        for run in self._running():
            run.on_agent_back(record.agent_id)

    def _lost(self, record: AgentRecord, reason: str) -> None:
        # An idle agent leaving is routine (e.g. --local shutting down); a run's agent is not.
        in_run = bool(self._running())
        log.log(logging.WARNING if in_run else logging.INFO, "agent %s lost: %s", record.agent_id, reason)
        for run in self._running():
            run.on_agent_lost(record.agent_id, reason, silent_s=self.registry.silent_s(record))

    def _judge_agents(self, late_s: float) -> None:
        """At each wake of the loop probe (every PROBE_PERIOD_S): agents silent too long are
        late or lost, but not for a silence the controller caused by not running."""
        if late_s > STALL_S:
            log.warning("the controller did not run for %.1f s; agents are not blamed for it", late_s)
            self.registry.forgive_silence()
        self.registry.check_silent()
