"""One simulated agent: a real `AgentService.Connect` session without engines.

It behaves as `loadfleet.agent.session` does on the wire: Hello, then Welcome; a Heartbeat
every `heartbeat_ms`; an Assignment is answered with READY, then one AgentInterval per
interval from the barrier (aligned to `start_at_ms + k * interval_ms`, sent when the
interval ends), the last one `final`, then FINISHED. StopJob ends the job at once with a
final report of the interval under way and STOPPED; a lease that runs out (no word from
the controller for the lease) ends it without a final report, as a real agent kills its
engines. The simulated agent never redials: a session that ends is counted.

Measured (see bench/fleet/README.md): renewal lateness (a heartbeat's send to the first
LeaseRenewal received after it), renewal gap excess (time between two renewals beyond the
heartbeat period) and ack latency (a message's send to the Ack covering it).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import logging
import time
from dataclasses import dataclass

import grpc

from loadfleet.v1 import agent_pb2

from .outbox import DEFAULT_CAPACITY, Outbox
from .payload import TemplateCache, interval_message
from .stats import FleetStats

log = logging.getLogger(__name__)

CONNECT_METHOD = "/loadfleet.v1.AgentService/Connect"
VERSION = "fleet-sim"
WELCOME_TIMEOUT_S = 30.0
DEFAULT_HEARTBEAT_MS = 1000
DEFAULT_LEASE_MS = 3000
# Heartbeats waiting for a renewal; more than this and the controller is not answering at
# all (each one past the bound is counted as unanswered instead of timed).
MAX_PENDING_BEATS = 64
# What the agent reports about itself: busy, but far from the controller's saturation marks
# (genbound: 90 % CPU, 250 ms loop lag), so no interval is flagged generator-bound.
HEALTH = agent_pb2.Health(cpu_pct=45.0, engine_cpu_pct=40.0, rss_mb=60.0, loop_lag_ms=0.5, mem_used_pct=30.0)


class TotalRow(enum.Enum):
    """Whether reports carry the agent's own `*`/`*` merge of its rows."""

    # Only to a controller that names its instance (the streaming controller): a
    # pre-streaming controller merges a `*`/`*` row like any other and counts it twice.
    AUTO = "auto"
    ALWAYS = "always"
    NEVER = "never"


@dataclass(frozen=True)
class SimAgentConfig:
    agent_id: str
    hostname: str
    labels: tuple[tuple[str, str], ...] = ()
    # Position in the fleet: agents start their template rotation at different places.
    index: int = 0
    outbox_capacity: int = DEFAULT_CAPACITY
    total_row: TotalRow = TotalRow.AUTO


class SimAgent:
    def __init__(self, config: SimAgentConfig, channel: grpc.aio.Channel, templates: TemplateCache, stats: FleetStats):
        self.config = config
        self._channel = channel
        self._templates = templates
        self._stats = stats
        self._outbox = Outbox(config.outbox_capacity)
        self._write_lock = asyncio.Lock()
        self._call = None
        self._tasks: set[asyncio.Task] = set()
        self._heartbeat_s = DEFAULT_HEARTBEAT_MS / 1000
        self._lease_s = DEFAULT_LEASE_MS / 1000
        self._job_lease_s = 0.0
        self._last_heard = time.monotonic()
        self._pending_beats: collections.deque[float] = collections.deque()
        self._last_renewal: float | None = None
        self._total_row = False
        self._job_id = ""
        self._stop_job = asyncio.Event()
        self._closing = False

    async def run(self) -> None:
        """One session, until the controller ends it or `close()` is called."""
        if self._closing:
            return
        self._call = self._channel.stream_stream(
            CONNECT_METHOD, request_serializer=None, response_deserializer=agent_pb2.ControllerMessage.FromString
        )()
        try:
            await self._welcome()
            self._spawn(self._heartbeat(), "heartbeat")
            await self._read()
            if not self._closing:
                self._stats.counters["sessions_ended_by_controller"] += 1
        except grpc.aio.AioRpcError as exc:
            if not self._closing:
                self._stats.session_errors[exc.code().name] += 1
        except (TimeoutError, ConnectionError) as exc:
            self._stats.session_errors[type(exc).__name__] += 1
        finally:
            await self._end()

    def close(self) -> None:
        """Ends the session (safe to call twice)."""
        self._closing = True
        if self._call is not None:
            self._call.cancel()

    # ---- session -----------------------------------------------------------------

    async def _welcome(self) -> None:
        hello = agent_pb2.Hello(
            agent_id=self.config.agent_id,
            hostname=self.config.hostname,
            cores=1,
            version=VERSION,
            capabilities=["engine"],
            labels=dict(self.config.labels),
        )
        # Hello opens a session and is never resent, so it carries no sequence number.
        await self._write(agent_pb2.AgentMessage(hello=hello).SerializeToString())
        message = await asyncio.wait_for(self._call.read(), WELCOME_TIMEOUT_S)
        if message is grpc.aio.EOF or not message.HasField("welcome"):
            raise ConnectionError("the controller did not welcome this agent")
        welcome = message.welcome
        self._heartbeat_s = (welcome.heartbeat_ms or DEFAULT_HEARTBEAT_MS) / 1000
        self._lease_s = (welcome.lease_ms or DEFAULT_LEASE_MS) / 1000
        self._last_heard = time.monotonic()
        if welcome.controller_instance:
            self._stats.controller_instances.add(welcome.controller_instance)
        mode = self.config.total_row
        self._total_row = mode is TotalRow.ALWAYS or (mode is TotalRow.AUTO and bool(welcome.controller_instance))
        self._stats.counters["sessions_welcomed"] += 1
        self._stats.counters["agents_sending_total_row"] += self._total_row

    async def _read(self) -> None:
        while (message := await self._call.read()) is not grpc.aio.EOF:
            now = time.monotonic()
            self._last_heard = now
            kind = message.WhichOneof("body")
            if kind == "lease":
                self._lease_s = (message.lease.lease_ms / 1000) or self._lease_s
                self._on_renewal(now)
                if message.lease.ack_through_seq:  # acknowledgements ride on renewals
                    for latency_s in self._outbox.ack(message.lease.ack_through_seq, now):
                        self._stats.ack_latency.record_s(latency_s)
                    self._stats.counters["acks"] += 1
            elif kind == "assignment":
                self._on_assignment(message.assignment)
            elif kind == "stop":
                if message.stop.job_id == self._job_id:
                    self._stats.counters["stop_jobs"] += 1
                    self._stop_job.set()
            else:
                self._stats.counters[f"unexpected_{kind}"] += 1

    def _on_renewal(self, now: float) -> None:
        """Every heartbeat still waiting is answered by this renewal."""
        self._stats.counters["renewals"] += 1
        wall = time.time()
        while self._pending_beats:
            lateness_s = now - self._pending_beats.popleft()
            self._stats.renewal_lateness.record_s(lateness_s)
            self._stats.renewal_lateness_series.record(wall, lateness_s * 1000)
        if self._last_renewal is not None:
            self._stats.renewal_gap_excess.record_s(max(0.0, now - self._last_renewal - self._heartbeat_s))
        self._last_renewal = now

    async def _heartbeat(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + self._heartbeat_s
        while True:
            await asyncio.sleep(max(0.0, due - loop.time()))
            due += self._heartbeat_s
            if len(self._pending_beats) < MAX_PENDING_BEATS:
                self._pending_beats.append(time.monotonic())
            else:
                self._stats.counters["heartbeats_unanswered"] += 1
            beat = agent_pb2.Heartbeat(sent_at_ms=int(time.time() * 1000), health=HEALTH)
            await self._write(agent_pb2.AgentMessage(heartbeat=beat).SerializeToString())
            self._stats.counters["heartbeats"] += 1

    async def _write(self, data: bytes) -> None:
        # grpc.aio allows one write at a time per call; heartbeats and reports share it.
        async with self._write_lock:
            await self._call.write(data)

    async def _end(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._call.cancel()
        self._stats.counters["heartbeats_unanswered"] += len(self._pending_beats)
        self._stats.counters["outbox_dropped"] += self._outbox.dropped
        self._stats.counters["outbox_outstanding_at_end"] += self._outbox.outstanding
        self._stats.counters["acks_beyond_sent"] += self._outbox.acks_beyond_sent

    def _spawn(self, coroutine, name: str) -> None:
        task = asyncio.create_task(coroutine, name=f"{self.config.agent_id}-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        # A write fails when the session has just ended; count it rather than leave an
        # exception nobody retrieves.
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not self._closing:
            self._stats.counters[f"task_error_{type(task.exception()).__name__}"] += 1

    # ---- jobs --------------------------------------------------------------------

    def _on_assignment(self, assignment: agent_pb2.Assignment) -> None:
        spec = assignment.spec
        if self._job_id:
            self._spawn(
                self._send_status(spec.job_id, agent_pb2.JOB_STATE_FAILED, f"agent is busy with job {self._job_id}"),
                "refusal",
            )
            return
        self._job_id = spec.job_id
        self._job_lease_s = assignment.lease_ms / 1000
        self._stop_job.clear()
        self._spawn(self._run_job(spec), f"job-{spec.job_id}")

    async def _run_job(self, spec) -> None:
        try:
            state = await self._produce(spec)
            await self._send_status(spec.job_id, state, "simulated")
            self._stats.counters["jobs_" + agent_pb2.JobState.Name(state).removeprefix("JOB_STATE_").lower()] += 1
        finally:
            self._job_id = ""

    async def _produce(self, spec) -> int:
        """Sends the job's intervals; returns its end state."""
        names = list(dict.fromkeys(r.name for r in spec.requests))
        pairs = [(t.url, name) for t in spec.targets for name in names]
        templates = self._templates.get(pairs, total_row=self._total_row)
        await self._send_status(spec.job_id, agent_pb2.JOB_STATE_READY, "simulated engines ready")
        interval_ms = spec.interval_ms or 1000
        end_ms = spec.start_at_ms + spec.duration_ms
        intervals = max(1, -(-spec.duration_ms // interval_ms))
        for k in range(intervals):
            start_ms = spec.start_at_ms + k * interval_ms
            stopped = await self._wait_until_ms(min(start_ms + interval_ms, end_ms))
            if self._lease_expired():
                self._stats.counters["lease_expiries"] += 1
                return agent_pb2.JOB_STATE_STOPPED
            template = templates[(self.config.index + k) % len(templates)]
            seq = self._outbox.add(time.monotonic())
            await self._write(
                interval_message(
                    seq=seq,
                    job_id=spec.job_id,
                    interval_start_ms=start_ms,
                    interval_ms=interval_ms,
                    template=template,
                    final=stopped or k == intervals - 1,
                )
            )
            self._stats.count_sent(start_ms, template.requests)
            if stopped:
                return agent_pb2.JOB_STATE_STOPPED
        return agent_pb2.JOB_STATE_FINISHED

    async def _wait_until_ms(self, wall_ms: int) -> bool:
        """Sleeps until a wall-clock time; True when StopJob came first."""
        delay_s = wall_ms / 1000 - time.time()
        if delay_s <= 0:
            return self._stop_job.is_set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_job.wait(), delay_s)
        return self._stop_job.is_set()

    def _lease_expired(self) -> bool:
        lease_s = max(self._lease_s, self._job_lease_s)
        return time.monotonic() - self._last_heard > lease_s

    async def _send_status(self, job_id: str, state: int, message: str) -> None:
        seq = self._outbox.add(time.monotonic())
        status = agent_pb2.JobStatus(job_id=job_id, state=state, message=message)
        await self._write(agent_pb2.AgentMessage(seq=seq, job_status=status).SerializeToString())
