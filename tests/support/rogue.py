"""A rogue agent: one AgentService.Connect session on the project's own stubs that says
whatever a test makes it say (a Hello of any fields, reports of any counts), as a buggy or
hostile agent would. Built for the red-team findings of issue 28; general enough for any
test that needs an agent it controls message by message.

It runs on threads, not on the test's event loop, so that it keeps its lease (heartbeats
every `beat_s`) while the test waits on a CLI process:

    with Rogue.connect(cluster.address, agent_id="rogue", labels={"rogue": "yes"}) as rogue:
        job = rogue.next_assignment(timeout_s=20)
        rogue.send(job_status=agent_pb2.JobStatus(job_id=job.spec.job_id, state=agent_pb2.JOB_STATE_RUNNING))
        rogue.send(interval=interval(job.spec.job_id, job.spec.start_at_ms, [row(...)]))

A session the controller refuses or ends raises `grpc.RpcError` from `connect` (refused at
its Hello) or shows in `ended`.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

import grpc

from loadfleet.v1 import agent_pb2, agent_pb2_grpc, stats_pb2

DEFAULT_BEAT_S = 0.2


def now_ms() -> int:
    return int(time.time() * 1000)


class Rogue:
    """One agent session; `send` numbers its messages (AgentMessage.seq) as an agent must."""

    def __init__(self, address: str, hello: agent_pb2.Hello, *, beat_s: float = DEFAULT_BEAT_S):
        self.address = address
        self.hello = hello
        self.beat_s = beat_s
        self.health = agent_pb2.Health()
        self.welcome: agent_pb2.Welcome | None = None
        self.assignments: list[agent_pb2.Assignment] = []
        self.received: list[agent_pb2.ControllerMessage] = []
        self.ended: grpc.RpcError | None = None  # how the controller ended the session
        self._seq = 0
        self._taken = 0  # assignments handed out by next_assignment
        self._outbox: queue.Queue[agent_pb2.AgentMessage | None] = queue.Queue()
        self._changed = threading.Condition()
        self._closed = threading.Event()
        self._channel = grpc.insecure_channel(address)
        self._call = None
        self._threads: list[threading.Thread] = []

    @classmethod
    def connect(cls, address: str, *, timeout_s: float = 10, beat_s: float = DEFAULT_BEAT_S, **hello_fields) -> Rogue:
        """A session opened with a Hello of these fields (agent_id, cores, labels, ...:
        agent.proto's Hello; cores 1 and sent_at_ms now unless given). Returns once the
        controller welcomed it; raises the controller's grpc.RpcError if it refused it."""
        hello_fields.setdefault("cores", 1)
        hello_fields.setdefault("sent_at_ms", now_ms())
        rogue = cls(address, agent_pb2.Hello(**hello_fields), beat_s=beat_s)
        rogue.start(timeout_s)
        return rogue

    def start(self, timeout_s: float = 10) -> None:
        self._outbox.put(agent_pb2.AgentMessage(hello=self.hello))
        self._call = agent_pb2_grpc.AgentServiceStub(self._channel).Connect(self._messages())
        self._spawn(self._read, "rogue-reader")
        with self._changed:
            self._changed.wait_for(lambda: self.welcome is not None or self.ended is not None, timeout_s)
        if self.ended is not None:
            self.close()
            raise self.ended
        if self.welcome is None:
            self.close()
            raise TimeoutError(f"no Welcome from {self.address} in {timeout_s} s")
        if self.beat_s:
            self._spawn(self._beat_forever, "rogue-heartbeats")

    def send(self, **body) -> int:
        """One numbered message, e.g. send(interval=...), send(job_status=...); its seq."""
        self._seq += 1
        self._outbox.put(agent_pb2.AgentMessage(seq=self._seq, **body))
        return self._seq

    def beat(self, **fields) -> None:
        """One heartbeat now (health: self.health unless given; host=HostStats(...) for a monitor)."""
        fields.setdefault("sent_at_ms", now_ms())
        fields.setdefault("health", self.health)
        self._outbox.put(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(**fields)))

    def next_assignment(self, timeout_s: float = 30) -> agent_pb2.Assignment:
        """The first assignment not yet taken."""
        with self._changed:
            taken = self._taken
            if not self._changed.wait_for(lambda: len(self.assignments) > taken or self.ended, timeout_s):
                raise TimeoutError(f"no assignment in {timeout_s} s")
            if len(self.assignments) <= taken:
                raise AssertionError(f"the session ended: {self.ended}")
            self._taken = taken + 1
            return self.assignments[taken]

    def close(self) -> None:
        """Ends the session (idempotent) and waits for its threads."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._outbox.put(None)
        if self._call is not None:
            self._call.cancel()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)
        self._channel.close()

    def __enter__(self) -> Rogue:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _messages(self) -> Iterator[agent_pb2.AgentMessage]:
        while (message := self._outbox.get()) is not None:
            yield message

    def _read(self) -> None:
        try:
            for message in self._call:  # type: ignore[union-attr]
                with self._changed:
                    self.received.append(message)
                    kind = message.WhichOneof("body")
                    if kind == "welcome":
                        self.welcome = message.welcome
                    elif kind == "assignment":
                        self.assignments.append(message.assignment)
                    self._changed.notify_all()
        except grpc.RpcError as exc:
            with self._changed:
                self.ended = exc
                self._changed.notify_all()

    def _beat_forever(self) -> None:
        while not self._closed.wait(self.beat_s):
            self.beat()

    def _spawn(self, target, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)


def stats_row(target: str, request: str, n: int, /, **fields) -> stats_pb2.IntervalStats:
    """A row of `n` requests, all 2xx responses; `fields` override any count (requests too),
    e.g. errors=[ErrorCount(...)]."""
    counts = {"requests": n, "status_2xx": n, **fields}
    return stats_pb2.IntervalStats(target=target, request=request, **counts)


def interval(
    job_id: str, start_ms: int, rows: list[stats_pb2.IntervalStats], *, interval_ms: int = 1000, **report
) -> agent_pb2.AgentInterval:
    """An AgentInterval of these rows (add the `*`/`*` total row yourself, or let the controller
    compute it); `report`: more IntervalReport fields (final=True, error_samples=[...])."""
    return agent_pb2.AgentInterval(
        job_id=job_id,
        report=stats_pb2.IntervalReport(interval_start_ms=start_ms, interval_ms=interval_ms, stats=rows, **report),
    )
