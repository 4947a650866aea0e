"""AgentService: one bidirectional stream per agent (see proto/loadfleet/v1/agent.proto)."""
from __future__ import annotations

import asyncio
import logging

import grpc

from loadfleet.v1 import agent_pb2, agent_pb2_grpc

from ..core import Controller
from ..errors import RunNotFound
from ..jobs import JobAssignment, run_id_of
from ..rundir import store_artifact_chunk
from . import convert

log = logging.getLogger(__name__)

# How long the controller waits for an agent's Hello.
HELLO_TIMEOUT_S = 10


class AgentSession:
    """The controller's end of one Connect stream: an outbound queue of messages.

    `None` in the queue ends the stream (close()).
    """

    def __init__(self) -> None:
        self.outbox: asyncio.Queue[agent_pb2.ControllerMessage | None] = asyncio.Queue()
        self.closed = False

    def assign(self, assignment: JobAssignment) -> None:
        self._send(convert.assignment_to_proto(assignment))

    def stop_job(self, job_id: str) -> None:
        self._send(agent_pb2.ControllerMessage(stop=agent_pb2.StopJob(job_id=job_id)))

    def renew_lease(self, lease_ms: int) -> None:
        self._send(agent_pb2.ControllerMessage(lease=agent_pb2.LeaseRenewal(lease_ms=lease_ms)))

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

    async def Connect(self, request_iterator, context: grpc.aio.ServicerContext):
        try:
            first = await asyncio.wait_for(anext(request_iterator), HELLO_TIMEOUT_S)
        except (StopAsyncIteration, TimeoutError):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a session starts with Hello")
        if not first.HasField("hello") or not first.hello.agent_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a session starts with Hello with an agent_id")
        identity = convert.identity_from_hello(first.hello)
        session = AgentSession()
        registry = self._controller.registry
        registry.join(identity, session)
        yield agent_pb2.ControllerMessage(welcome=agent_pb2.Welcome(
            agent_id=identity.agent_id, heartbeat_ms=self._controller.heartbeat_ms,
            lease_ms=self._controller.lease_ms))
        reader = asyncio.create_task(self._read(identity.agent_id, request_iterator, session),
                                     name=f"agent-reader-{identity.agent_id}")
        try:
            while (message := await session.outbox.get()) is not None:
                yield message
        finally:
            reader.cancel()
            session.close()
            registry.lose(identity.agent_id, "its session ended", link=session)

    async def _read(self, agent_id: str, request_iterator, session: AgentSession) -> None:
        try:
            async for message in request_iterator:
                self._handle(agent_id, message, session)
        except (grpc.aio.AioRpcError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("agent %s: bad message", agent_id)
        finally:
            session.close()

    def _handle(self, agent_id: str, message: agent_pb2.AgentMessage, session: AgentSession) -> None:
        registry = self._controller.registry
        kind = message.WhichOneof("body")
        if kind == "heartbeat":
            self._controller.on_heartbeat(agent_id, convert.health_from_proto(message.heartbeat.health),
                                          convert.host_from_proto(message.heartbeat))
            session.renew_lease(self._controller.lease_ms)
        elif kind == "interval":
            registry.seen(agent_id)
            self._controller.on_report(convert.report_from_proto(agent_id, message.interval))
        elif kind == "job_status":
            registry.seen(agent_id)
            state = convert.job_state_from_proto(message.job_status.state)
            if state:
                self._controller.on_job_state(agent_id, message.job_status.job_id, state,
                                              message.job_status.message)
        elif kind == "artifact":
            registry.seen(agent_id)
            self._store_artifact(agent_id, message.artifact)
        else:
            log.warning("agent %s sent an unexpected %s", agent_id, kind)

    def _store_artifact(self, agent_id: str, artifact: agent_pb2.Artifact) -> None:
        """A chunk of a file for the run directory (Gatling's report); a bad one is logged and dropped."""
        try:
            run_dir = self._controller.get_run(run_id_of(artifact.job_id)).run_dir
            stored = store_artifact_chunk(run_dir, agent_id, artifact.name, artifact.data, last=artifact.last)
        except (RunNotFound, OSError, ValueError) as exc:
            log.warning("agent %s: artifact %r of job %s not stored: %s", agent_id, artifact.name,
                        artifact.job_id, exc)
            return
        if stored:
            log.info("agent %s: %s of job %s stored in %s", agent_id, artifact.name, artifact.job_id, stored)
