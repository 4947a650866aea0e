"""The agent's life: dial the controller, keep the session alive, run what it assigns.

The agent always dials out and redials with backoff when the session breaks. A job
keeps running across a short break (its reports wait in the outbox, and are written
again after reconnecting until the controller acknowledges them) but only while the
lease lasts: when the controller that owns the job has been silent for the whole lease,
every engine is killed at once. A job belongs to the controller instance that assigned
it; a restarted controller that adopts the job (Welcome.adopted_jobs) owns it from then
on, and one that does not renews nothing of it, so the job stops at the end of its lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc

from loadfleet.v1 import agent_pb2, agent_pb2_grpc
from loadfleet.wire import DEFAULT_HEARTBEAT_MS, DEFAULT_LEASE_MS
from loadfleet.wire.dial import ClientCredentials, open_channel

from . import __version__
from .clock import ClockEstimate, wall_ms
from .guard import LoadPolicy
from .health import HealthMonitor
from .hoststats import HostFigures, MonitorConfig
from .job import JobRunner
from .lease import Lease
from .outbox import DEFAULT_MEMORY_LIMIT, Outbox
from .spool import DEFAULT_LIMIT_MB, limit_bytes_of

log = logging.getLogger(__name__)

BACKOFF_FIRST_S = 0.25
BACKOFF_MAX_S = 5.0
WATCHDOG_PERIOD_S = 0.1
CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class AgentConfig:
    controller: str
    agent_id: str
    engine_program: str
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    labels: tuple[tuple[str, str], ...] = ()
    spool_dir: Path | None = None
    # The spool's size limit (its oldest messages are dropped beyond it), and how many
    # unacknowledged messages stay in memory before messages go to the spool.
    spool_limit_mb: float = DEFAULT_LIMIT_MB
    outbox_memory: int = DEFAULT_MEMORY_LIMIT
    # Monitor-only: no load; every heartbeat reports this host (a target, an NFS server).
    monitor: MonitorConfig | None = None
    # How to reach the controller: plaintext (loopback), or TLS with a certificate or token.
    credentials: ClientCredentials = ClientCredentials()
    # Where this agent may send load (allow-list) and which Gatling projects it runs.
    policy: LoadPolicy = LoadPolicy()


class Agent:
    def __init__(self, config: AgentConfig):
        self.config = config
        self._outbox = Outbox(
            config.spool_dir, memory_limit=config.outbox_memory, spool_limit_bytes=limit_bytes_of(config.spool_limit_mb)
        )
        self._lease = Lease()
        self._health = HealthMonitor()
        self._host = config.monitor.sampler() if config.monitor else None
        self._job: JobRunner | None = None
        self._job_task: asyncio.Task[None] | None = None
        self._heartbeat_ms = DEFAULT_HEARTBEAT_MS
        self._lease_ms = DEFAULT_LEASE_MS
        self._stopping = False
        self._job_lease_ms = 0  # the running job's own minimum lease, if any
        self._instance = ""  # the controller instance of the current session
        self._job_owner = ""  # the controller instance that owns the running job
        self._clock = ClockEstimate()

    async def run(self, stop: asyncio.Event) -> None:
        """Runs until `stop` is set; then kills any load and returns."""
        watchdog = asyncio.create_task(self._watch_lease(), name="lease-watchdog")
        sessions = asyncio.create_task(self._dial_forever(), name="sessions")
        try:
            await stop.wait()
        finally:
            # grpc.aio may swallow a cancellation that arrives inside call.read() (the call
            # ends instead), so the dial loop also checks this flag.
            self._stopping = True
            for task in (sessions, watchdog):
                task.cancel()
            await asyncio.gather(sessions, watchdog, return_exceptions=True)
            await self._end_job_now()

    async def _dial_forever(self) -> None:
        backoff_s = BACKOFF_FIRST_S
        while not self._stopping:
            started = time.monotonic()
            try:
                await self._session()
                reason = "the controller ended the session"
            except grpc.aio.AioRpcError as exc:
                reason = f"{exc.code().name}: {exc.details()}"
            except (TimeoutError, ConnectionError) as exc:
                reason = str(exc) or type(exc).__name__
            if self._stopping:
                return
            if time.monotonic() - started > BACKOFF_MAX_S:
                backoff_s = BACKOFF_FIRST_S  # the session was up a while: redial quickly
            log.warning("controller %s unreachable (%s); retrying in %.2f s", self.config.controller, reason, backoff_s)
            await asyncio.sleep(backoff_s)
            backoff_s = min(BACKOFF_MAX_S, backoff_s * 2)

    async def _session(self) -> None:
        async with open_channel(self.config.controller, self.config.credentials) as channel:
            try:
                await asyncio.wait_for(channel.channel_ready(), CONNECT_TIMEOUT_S)
            except TimeoutError:
                raise TimeoutError(f"no connection within {CONNECT_TIMEOUT_S:g} s") from None
            call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
            await call.write(agent_pb2.AgentMessage(hello=self._hello()))
            welcome = await call.read()
            if welcome is grpc.aio.EOF or not welcome.HasField("welcome"):
                raise ConnectionError("the controller did not welcome this agent")
            self._welcomed(welcome.welcome)
            self._clock_echo(welcome.welcome.clock)
            log.info("connected to %s as %s", self.config.controller, self.config.agent_id)
            self._outbox.rewind()
            tasks = [
                asyncio.create_task(self._write(call), name="session-writer"),
                asyncio.create_task(self._heartbeat(), name="heartbeat"),
            ]
            try:
                await self._read(call)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    def _welcomed(self, welcome: agent_pb2.Welcome) -> None:
        self._heartbeat_ms = welcome.heartbeat_ms or DEFAULT_HEARTBEAT_MS
        self._lease_ms = welcome.lease_ms or self._lease_ms
        self._instance = welcome.controller_instance
        if self._job is not None and self._job.job_id in welcome.adopted_jobs:
            log.info("controller %s took job %s over", self._instance, self._job.job_id)
            self._job_owner = self._instance
        elif self._job is not None and self._job_owner != self._instance:
            log.warning(
                "controller %s does not collect job %s: it stops when its lease ends",
                self._instance or "(unnamed)",
                self._job.job_id,
            )
        self._renew_lease()

    def _clock_echo(self, echo: agent_pb2.ClockEcho) -> None:
        if echo.agent_sent_at_ms:
            self._clock.add(echo.agent_sent_at_ms, echo.controller_at_ms, wall_ms())

    def _renew_lease(self) -> None:
        """Only the controller that owns the running job may extend its life."""
        if self._job is None or self._job_owner == self._instance:
            self._lease.renew(self._current_lease_ms())

    def _hello(self) -> agent_pb2.Hello:
        hello = agent_pb2.Hello(
            agent_id=self.config.agent_id,
            hostname=socket.gethostname(),
            cores=self.config.cores,
            version=__version__,
            capabilities=["engine", "gatling", "scenarios"],
            labels=dict(self.config.labels),
            allow_targets=self.config.policy.allow.texts(),
            gatling_root=str(self.config.policy.gatling_root or ""),
            sent_at_ms=wall_ms(),
        )
        if self._job is not None:
            hello.running_jobs.add(job_id=self._job.job_id, controller_instance=self._job_owner)
        if monitor := self.config.monitor:
            hello.capabilities[:] = ["monitor"]
            hello.monitor.targets[:] = monitor.targets
            hello.monitor.role = monitor.role
            hello.monitor.processes[:] = [g.name for g in monitor.groups]
        return hello

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        while (message := await call.read()) is not grpc.aio.EOF:
            kind = message.WhichOneof("body")
            if kind == "lease":
                self._clock_echo(message.lease.clock)
                self._lease_ms = message.lease.lease_ms or self._lease_ms
                self._outbox.ack(message.lease.ack_through_seq)
            elif kind == "assignment":
                self._start_job(message.assignment)
            self._renew_lease()
            if kind == "stop":
                if self._job and self._job.job_id == message.stop.job_id:
                    await self._job.stop()
            elif kind == "adjust":
                if self._job and self._job.job_id == message.adjust.job_id:
                    await self._job.adjust(list(message.adjust.engines))
            elif kind not in ("lease", "assignment"):
                log.warning("ignoring an unexpected %s from the controller", kind)

    async def _write(self, call: grpc.aio.StreamStreamCall) -> None:
        while True:
            message = await self._outbox.next()
            await call.write(message)
            self._outbox.written(message)

    async def _heartbeat(self) -> None:
        period_s = self._heartbeat_ms / 1000
        expected = time.monotonic() + period_s
        while True:
            await asyncio.sleep(max(0.0, expected - time.monotonic()))
            lag_ms = max(0.0, (time.monotonic() - expected) * 1000)
            expected += period_s
            # Off the event loop: near port exhaustion the TCP tables are read (tens of thousands of lines).
            h = await asyncio.to_thread(self._health.sample, self._job.pids if self._job else [], lag_ms)
            beat = agent_pb2.Heartbeat(
                sent_at_ms=wall_ms(),
                # HealthSample's fields are the message's; a wait of None leaves it unset.
                health=agent_pb2.Health(**asdict(h)),
            )
            if best := self._clock.best:
                beat.clock.CopyFrom(agent_pb2.ClockOffset(offset_ms=best.offset_ms, rtt_ms=best.rtt_ms))
            if self._host is not None:
                # Off the event loop: a server's counters may take up to a second to read.
                beat.host.CopyFrom(host_to_proto(await asyncio.to_thread(self._host.sample)))
            self._outbox.put(agent_pb2.AgentMessage(heartbeat=beat))

    def _start_job(self, assignment: agent_pb2.Assignment) -> None:
        spec = assignment.spec
        refusal = (
            "this agent only monitors its host"
            if self.config.monitor
            else f"agent is busy with job {self._job.job_id}"
            if self._job is not None
            else ""
        )
        if refusal:
            self._outbox.put(
                agent_pb2.AgentMessage(
                    job_status=agent_pb2.JobStatus(
                        job_id=spec.job_id, state=agent_pb2.JOB_STATE_FAILED, message=refusal
                    )
                )
            )
            return
        self._job = JobRunner(
            assignment,
            self.config.engine_program,
            self._outbox.put,
            policy=self.config.policy,
            clock_offset_ms=self._clock.offset_ms,
        )
        self._job_owner = self._instance
        self._job_lease_ms = assignment.lease_ms
        self._job_task = asyncio.create_task(self._run_job(self._job), name=f"job-{spec.job_id}")

    async def _run_job(self, job: JobRunner) -> None:
        try:
            await job.run()
        finally:
            self._job = None

    def _current_lease_ms(self) -> int:
        return max(self._lease_ms, self._job_lease_ms if self._job is not None else 0)

    async def _watch_lease(self) -> None:
        while True:
            await asyncio.sleep(WATCHDOG_PERIOD_S)
            if self._job is not None and self._lease.expired() and not self._job.halted:
                log.warning("lease expired: no word from the controller; stopping all load")
                await self._job.halt("its lease expired (no word from the controller)")

    async def _end_job_now(self) -> None:
        if self._job is not None:
            self._job.kill()
        if self._job_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._job_task


def host_to_proto(h: HostFigures) -> agent_pb2.HostStats:
    return agent_pb2.HostStats(
        cores=h.cores,
        cpu_pct=h.cpu_pct,
        mem_used_pct=h.mem_used_pct,
        net_rx_bytes_per_s=h.net_rx_bytes_per_s,
        net_tx_bytes_per_s=h.net_tx_bytes_per_s,
        tcp_established=h.tcp_established,
        processes=[
            agent_pb2.ProcessStats(name=p.name, count=p.count, cpu_pct=p.cpu_pct, rss_mb=p.rss_mb, cap_pct=p.cap_pct)
            for p in h.processes
        ],
        counters=[agent_pb2.ServerCounter(name=name, value=value) for name, value in h.counters.items()],
    )
