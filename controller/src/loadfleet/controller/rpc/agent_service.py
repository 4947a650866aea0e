"""AgentService: one bidirectional stream per agent (see proto/loadfleet/v1/agent.proto)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import grpc

from loadfleet.controller.fleet.jobs import JobAssignment
from loadfleet.controller.fleet.scheduler import EngineShare
from loadfleet.controller.fleet.spooldrops import NoticeLog
from loadfleet.controller.plan.feeds import Feed
from loadfleet.controller.rpc import convert, jobconvert
from loadfleet.controller.rpc.inbox import Inbox
from loadfleet.controller.service.controller import Controller
from loadfleet.v1 import agent_pb2, agent_pb2_grpc

log = logging.getLogger(__name__)

# How long the controller waits for an agent's Hello.
HELLO_TIMEOUT_S = 10
# Refused reports are logged once per agent in this many seconds.
REFUSAL_LOG_PERIOD_S = 60.0
# The messages addressed to a job (each has a `job_id`): an agent's only for its own jobs. An
# interval is checked by its report limits (`_report`), which are None for a stranger's job.
JOB_MESSAGES = frozenset({"job_status", "artifact", "engine_failure", "spool_drop"})


class OncePerAgent:
    """Logs a warning about an agent at most once per period (a misbehaving agent sends a
    report a second). Holds one time per agent that misbehaved."""

    def __init__(self, period_s: float = REFUSAL_LOG_PERIOD_S):
        self._period_s = period_s
        self._last: dict[str, float] = {}

    def warn(self, agent_id: str, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last.get(agent_id, -self._period_s) >= self._period_s:
            self._last[agent_id] = now
            log.warning(message, *args)


class Delivery:
    """Which of an agent's messages this session received and which are settled (stored
    for good, or deliberately dropped). The acknowledgement is cumulative: every message up
    to the first one still pending, and never past a gap (an agent numbers its messages
    consecutively; a message this session did not get stays the agent's to send again).
    Holds the pending ones only: those in open intervals."""

    def __init__(self, agent_id: str = "") -> None:
        self._agent_id = agent_id
        self._pending: set[int] = set()
        self._next: int | None = None  # the next number in sequence
        self._gap = False
        self.acked = 0

    def received(self, seq: int) -> None:
        if not seq:
            return
        if self._next is None:
            self._next, self.acked = seq, seq - 1
        if seq == self._next and not self._gap:
            self._next += 1
        elif seq > self._next and not self._gap:
            self._gap = True
            log.warning(
                "agent %s: message %d came after %d; acknowledgements stop there until it reconnects",
                self._agent_id,
                seq,
                self._next - 1,
            )
        self._pending.add(seq)

    def settled(self, seq: int) -> int | None:
        """The new acknowledgement if this advanced it, else None."""
        self._pending.discard(seq)
        if self._next is None:
            return None
        through = self._next - 1
        if self._pending:
            through = min(through, min(self._pending) - 1)
        if through > self.acked:
            self.acked = through
            return through
        return None


def clock_echo(agent_sent_at_ms: int) -> agent_pb2.ClockEcho:
    """The controller's clock now, answering the agent's reading (agent/clock.py)."""
    return agent_pb2.ClockEcho(agent_sent_at_ms=agent_sent_at_ms, controller_at_ms=int(time.time() * 1000))


class AgentSession:
    """The controller's end of one Connect stream: an outbound queue of messages, and the
    delivery state of the agent's messages.

    `None` in the queue ends the stream (close()). The queue holds lease renewals (which
    carry acknowledgements) and assignments, each answered or consumed within a heartbeat
    or two; a session whose agent stops reading is lost after 3 silent heartbeats.
    """

    def __init__(self, agent_id: str = "") -> None:
        self.outbox: asyncio.Queue[agent_pb2.ControllerMessage | None] = asyncio.Queue()
        self.closed = False
        self.delivery = Delivery(agent_id)

    def settle(self, seq: int) -> None:
        """The agent's message `seq` is stored: the next lease renewal acknowledges it."""
        self.delivery.settled(seq)

    def assign(self, assignment: JobAssignment) -> None:
        self._send(jobconvert.assignment_to_proto(assignment))

    def stop_job(self, job_id: str) -> None:
        self._send(agent_pb2.ControllerMessage(stop=agent_pb2.StopJob(job_id=job_id)))

    def adjust(self, job_id: str, engines: tuple[EngineShare, ...], feed: Feed | None = None) -> None:
        self._send(jobconvert.adjust_to_proto(job_id, engines, feed))

    def renew_lease(self, lease_ms: int, agent_sent_at_ms: int = 0) -> None:
        """With `agent_sent_at_ms` (a heartbeat's clock), the controller's clock now answers it."""
        renewal = agent_pb2.LeaseRenewal(lease_ms=lease_ms, ack_through_seq=self.delivery.acked)
        if agent_sent_at_ms:
            renewal.clock.CopyFrom(clock_echo(agent_sent_at_ms))
        self._send(agent_pb2.ControllerMessage(lease=renewal))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.outbox.put_nowait(None)

    def _send(self, message: agent_pb2.ControllerMessage) -> None:
        if not self.closed:
            self.outbox.put_nowait(message)


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    def __init__(self, controller: Controller):
        self._controller = controller
        self._refused = OncePerAgent()
        self._strangers = OncePerAgent()  # messages for jobs that are not the agent's
        self._artifacts_refused = OncePerAgent()
        self._drop_notices = NoticeLog()
        # Everything but heartbeats, worked through in slices (inbox.py): renewals never wait
        # behind a fleet's reports.
        self.inbox: Inbox[tuple[str, agent_pb2.AgentMessage, AgentSession]] = Inbox(lambda m: self._handle(*m))

    async def Connect(
        self, request_iterator: AsyncIterator[agent_pb2.AgentMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[agent_pb2.ControllerMessage]:
        try:
            first = await asyncio.wait_for(anext(request_iterator), HELLO_TIMEOUT_S)
        except (StopAsyncIteration, TimeoutError):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a session starts with Hello")
        if not first.HasField("hello") or not first.hello.agent_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a session starts with Hello with an agent_id")
        try:
            identity = convert.identity_from_hello(first.hello)
        except convert.BadHello as exc:
            log.warning("an agent's Hello refused: %s", exc)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Hello refused: {exc}")
        session = AgentSession(identity.agent_id)
        registry = self._controller.registry
        registry.join(identity, session)
        adopted = self._controller.adopted_jobs(identity.agent_id, [j.job_id for j in first.hello.running_jobs])
        yield agent_pb2.ControllerMessage(
            welcome=agent_pb2.Welcome(
                agent_id=identity.agent_id,
                heartbeat_ms=self._controller.heartbeat_ms,
                lease_ms=self._controller.lease_ms,
                controller_instance=self._controller.instance_id,
                adopted_jobs=adopted,
                clock=clock_echo(first.hello.sent_at_ms),
            )
        )
        reader = asyncio.create_task(
            self._read(identity.agent_id, request_iterator, session), name=f"agent-reader-{identity.agent_id}"
        )
        try:
            while (message := await session.outbox.get()) is not None:
                yield message
        finally:
            reader.cancel()
            session.close()
            registry.disconnected(identity.agent_id, "its session ended", session)

    async def _read(
        self, agent_id: str, request_iterator: AsyncIterator[agent_pb2.AgentMessage], session: AgentSession
    ) -> None:
        try:
            async for message in request_iterator:
                if message.WhichOneof("body") == "heartbeat":
                    self._beat(agent_id, message.heartbeat, session)
                else:
                    await self.inbox.put((agent_id, message, session), message.ByteSize(), sender=agent_id)
        except (grpc.aio.AioRpcError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("agent %s: bad message", agent_id)
        finally:
            session.close()

    def _beat(self, agent_id: str, beat: agent_pb2.Heartbeat, session: AgentSession) -> None:
        """A heartbeat, answered at once with a lease renewal (and the acknowledgements so far)."""
        controller = self._controller
        clock = convert.clock_from_proto(beat)
        # A monitor's sample is decoded only if it is due (at most one a heartbeat period).
        due = beat.HasField("host") and controller.host_samples.admit(agent_id, beat.host.ByteSize())
        host = convert.host_from_proto(beat, clock) if due else None
        controller.on_heartbeat(agent_id, convert.health_from_proto(beat.health), host, clock)
        session.renew_lease(controller.lease_ms, beat.sent_at_ms)

    def _handle(self, agent_id: str, message: agent_pb2.AgentMessage, session: AgentSession) -> None:
        """Any message but a heartbeat, in the order the agent sent it."""
        controller = self._controller
        kind = message.WhichOneof("body")
        controller.registry.seen(agent_id)
        seq = message.seq
        session.delivery.received(seq)
        job_id = getattr(message, kind).job_id if kind in JOB_MESSAGES else None
        if job_id is not None and controller.job_run(agent_id, job_id) is None:
            self._strangers.warn(
                agent_id,
                "agent %s: %s for job %r refused: no job of this agent in an open run",
                agent_id,
                kind,
                job_id[:80],
            )
            session.settle(seq)  # settled: never sent again
            return
        if kind == "interval":
            self._report(agent_id, seq, message.interval)
            return  # settled once its interval is stored
        if kind == "job_status":
            status = convert.job_status_from_proto(message.job_status)
            if status:
                controller.on_job_state(agent_id, *status)
        elif kind == "artifact":
            self._store_artifact(agent_id, message.artifact)
        elif kind == "engine_failure":
            controller.on_engine_failure(convert.engine_failure_from_proto(agent_id, message.engine_failure))
        elif kind == "spool_drop":
            if self._drop_notices.first_time(agent_id, seq):
                controller.on_spool_dropped(agent_id, convert.spool_drop_from_proto(message.spool_drop))
        else:
            log.warning("agent %s sent an unexpected %s", agent_id, kind)
        session.settle(seq)

    def _report(self, agent_id: str, seq: int, pb: agent_pb2.AgentInterval) -> None:
        """An agent's interval: checked against what its job may hold before anything is
        decoded, then into its run."""
        controller = self._controller
        limits = controller.report_limits(agent_id, pb.job_id)
        try:
            if limits is None:
                raise convert.BadReport(f"job {pb.job_id!r} is not a running job of this agent")
            closed = controller.report_closed(pb.job_id, pb.report.interval_start_ms)
            report = convert.report_from_proto(agent_id, seq, pb, limits, counts_only=closed)
        except convert.BadReport as exc:
            self._refused.warn(agent_id, f"agent %s: report refused, not counted: {exc}", agent_id)
            controller.settle(agent_id, seq)
            return
        controller.on_report(report)

    def _store_artifact(self, agent_id: str, artifact: agent_pb2.Artifact) -> None:
        """A chunk of a file for the run directory (Gatling's report), within the agent's
        budget in that run; a refused one (or one the disk cannot take: the run's summary
        lists the report as incomplete) is logged and dropped."""
        try:
            stored = self._controller.on_artifact(
                agent_id, artifact.job_id, artifact.name, artifact.data, last=artifact.last
            )
        except (OSError, ValueError) as exc:
            self._artifacts_refused.warn(
                agent_id,
                "agent %s: artifact %r of job %s not stored: %s",
                agent_id,
                artifact.name[:80],
                artifact.job_id,
                exc,
            )
            return
        if stored:
            log.info("agent %s: %s of job %s stored in %s", agent_id, artifact.name, artifact.job_id, stored)
