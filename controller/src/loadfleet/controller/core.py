"""The controller's state: the agent registry and the runs, and the tasks that keep
them moving. The RPC servicers are thin adapters over this object."""
from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from pathlib import Path

from .admission import admit, influx_config
from .agents import DEFAULT_HEARTBEAT_MS, DEFAULT_LEASE_MS, AgentRecord, AgentRegistry, Health
from .errors import RunNotFound
from .hosts import HostSample
from .jobs import JobReport, JobState, run_id_of
from .plan import Plan, parse_plan
from .run import Run
from .sinks import Sink
from .sinks.influx import InfluxConfig, InfluxSink, influx_writer

log = logging.getLogger(__name__)

DEFAULT_RUNS_DIR = Path("runs")
MONITOR_PERIOD_S = 0.25
# A monitor tick this late means the controller itself was stopped or starved.
STALL_S = 1.0
# How long closing the controller waits for runs to write their results and flush sinks.
CLOSE_TIMEOUT_S = 30.0


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class Controller:
    def __init__(self, *, runs_dir: Path = DEFAULT_RUNS_DIR, heartbeat_ms: int = DEFAULT_HEARTBEAT_MS,
                 lease_ms: int = DEFAULT_LEASE_MS, influx: InfluxConfig | None = None, allow_plan_influx: bool = False):
        self.runs_dir = runs_dir
        self.influx = influx
        self.allow_plan_influx = allow_plan_influx  # plans may name their InfluxDB (admission.py)
        self.heartbeat_ms = heartbeat_ms
        self.lease_ms = lease_ms
        self.registry = AgentRegistry(heartbeat_ms=heartbeat_ms, on_joined=self._joined, on_lost=self._lost)
        self._runs: dict[str, Run] = {}
        self._tasks: set[asyncio.Task] = set()
        self._monitor: asyncio.Task | None = None

    async def start(self) -> None:
        self._monitor = asyncio.create_task(self._watch_agents(), name="agent-monitor")

    async def close(self) -> None:
        """Stops running runs, lets them write results and flush their sinks, then
        stops background tasks; safe to call twice."""
        for run in self._runs.values():
            run.stop()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=CLOSE_TIMEOUT_S)
        tasks = [t for t in (self._monitor, *self._tasks) if t]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._monitor = None
        self._tasks.clear()

    # ---- runs --------------------------------------------------------------------

    def start_run(self, plan_yaml: str) -> Run:
        """Validates the plan (PlanError lists every problem) and starts the run."""
        plan = parse_plan(plan_yaml)
        admit(plan, self.registry, allow_plan_influx=self.allow_plan_influx)
        run_id = new_run_id()
        run = Run(run_id, plan, self.runs_dir / run_id, self.registry, sinks=self._sinks_for(plan))
        self._runs[run_id] = run
        task = asyncio.create_task(run.execute(), name=f"run-{run_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run

    def _sinks_for(self, plan: Plan) -> list[Sink]:
        """The plan's InfluxDB if it names one, else the controller's, else none."""
        config = influx_config(plan, self.influx)
        if config is None:
            return []
        slug = hashlib.sha256(f"{config.url} {config.org} {config.bucket}".encode()).hexdigest()[:12]
        sink = InfluxSink(influx_writer(config), self.runs_dir / ".spool" / f"influx-{slug}",
                          description=f"InfluxDB {config.url} ({config.bucket})")
        sink.start()
        return [sink]

    def get_run(self, run_id: str) -> Run:
        try:
            return self._runs[run_id]
        except KeyError:
            raise RunNotFound(f"no run {run_id!r} on this controller") from None

    def runs(self) -> list[Run]:
        return sorted(self._runs.values(), key=lambda r: r.started_ms)

    # ---- from agents -------------------------------------------------------------

    def on_report(self, report: JobReport) -> None:
        run = self._runs.get(run_id_of(report.job_id))
        if run:
            run.on_report(report)

    def on_heartbeat(self, agent_id: str, health: Health, host: HostSample | None = None) -> None:
        self.registry.seen(agent_id, health)
        record = self.registry.get(agent_id)
        monitor = record.identity.monitor if record else None
        for run in self._runs.values():
            if monitor and host:
                run.on_host(agent_id, monitor, host)
            else:
                run.on_health(agent_id, health)

    def on_job_state(self, agent_id: str, job_id: str, state: JobState, message: str) -> None:
        run = self._runs.get(run_id_of(job_id))
        if run:
            run.on_job_state(agent_id, job_id, state, message)

    def _joined(self, record: AgentRecord) -> None:
        log.info("agent %s joined (%s, %d cores)", record.agent_id, record.identity.hostname,
                 record.identity.cores)

    def _lost(self, record: AgentRecord, reason: str) -> None:
        # An idle agent leaving is routine (e.g. --local shutting down); a run's agent is not.
        in_run = any(not run.state.ended for run in self._runs.values())
        log.log(logging.WARNING if in_run else logging.INFO, "agent %s lost: %s", record.agent_id, reason)
        for run in self._runs.values():
            run.on_agent_lost(record.agent_id, reason)

    async def _watch_agents(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            now = loop.time()
            if now - last > MONITOR_PERIOD_S + STALL_S:
                log.warning("the controller did not run for %.1f s; agents are not blamed for it", now - last)
                self.registry.forgive_silence()
            last = now
            self.registry.check_silent()
            await asyncio.sleep(MONITOR_PERIOD_S)
