"""Simulated agents against an in-process controller that speaks the delivery contract
(acks, a controller instance, StopJob), which today's controller does not exercise."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import grpc
import pytest

from bench.fleet.fleetsim.agent import TotalRow
from bench.fleet.fleetsim.fleet import FleetConfig, run_fleet
from loadfleet.v1 import agent_pb2, agent_pb2_grpc, job_pb2

INTERVAL_MS = 250
INTERVALS = 4
AGENTS = 3
TIMEOUT_S = 15


@dataclass(frozen=True)
class Behaviour:
    instance: str = "controller-1"
    ack: bool = True
    stop_after_intervals: int = 0  # 0: never send StopJob


class FakeController(agent_pb2_grpc.AgentServiceServicer):
    """Welcomes, assigns one job of INTERVALS intervals at once, renews every heartbeat,
    acknowledges every message with a sequence number, and records what it received."""

    def __init__(self, behaviour: Behaviour):
        self.behaviour = behaviour
        self.received: dict[str, list[agent_pb2.AgentMessage]] = {}

    async def Connect(self, request_iterator, context):
        hello = await anext(request_iterator)
        agent_id = hello.hello.agent_id
        self.received[agent_id] = [hello]
        out: asyncio.Queue = asyncio.Queue()
        yield agent_pb2.ControllerMessage(
            welcome=agent_pb2.Welcome(
                agent_id=agent_id, heartbeat_ms=100, lease_ms=3000, controller_instance=self.behaviour.instance
            )
        )
        start_ms = (int(time.time() * 1000) // INTERVAL_MS + 2) * INTERVAL_MS
        yield agent_pb2.ControllerMessage(
            assignment=agent_pb2.Assignment(
                spec=job_pb2.JobSpec(
                    job_id="job-1",
                    targets=[job_pb2.Target(url="http://127.0.0.1:9")],
                    requests=[job_pb2.RequestSpec(name="a"), job_pb2.RequestSpec(name="b")],
                    start_at_ms=start_ms,
                    duration_ms=INTERVALS * INTERVAL_MS,
                    interval_ms=INTERVAL_MS,
                )
            )
        )
        reader = asyncio.create_task(self._read(agent_id, request_iterator, out))
        try:
            while True:
                yield await out.get()
        finally:
            reader.cancel()

    async def _read(self, agent_id, request_iterator, out: asyncio.Queue) -> None:
        intervals = 0
        through = 0
        async for message in request_iterator:
            self.received[agent_id].append(message)
            kind = message.WhichOneof("body")
            if kind == "heartbeat":  # the renewal acknowledges everything received so far
                out.put_nowait(
                    agent_pb2.ControllerMessage(
                        lease=agent_pb2.LeaseRenewal(
                            lease_ms=3000, ack_through_seq=through if self.behaviour.ack else 0
                        )
                    )
                )
            else:
                through = max(through, message.seq)
            if kind == "interval":
                intervals += 1
                if intervals == self.behaviour.stop_after_intervals:
                    out.put_nowait(agent_pb2.ControllerMessage(stop=agent_pb2.StopJob(job_id="job-1")))

    def ended_jobs(self) -> int:
        return sum(
            any(
                m.WhichOneof("body") == "job_status"
                and m.job_status.state in (agent_pb2.JOB_STATE_FINISHED, agent_pb2.JOB_STATE_STOPPED)
                for m in messages
            )
            for messages in self.received.values()
        )


def run_against(behaviour: Behaviour, total_row: TotalRow = TotalRow.AUTO) -> tuple[FakeController, dict]:
    async def go():
        fake = FakeController(behaviour)
        server = grpc.aio.server()
        agent_pb2_grpc.add_AgentServiceServicer_to_server(fake, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        stop = asyncio.Event()

        async def stop_when_done():
            while fake.ended_jobs() < AGENTS:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # the last acks
            stop.set()

        watcher = asyncio.create_task(stop_when_done())
        try:
            results = await asyncio.wait_for(
                run_fleet(
                    FleetConfig(controller=f"127.0.0.1:{port}", agents=AGENTS, total_row=total_row, max_s=TIMEOUT_S),
                    stop,
                ),
                TIMEOUT_S + 5,
            )
        finally:
            watcher.cancel()
            await server.stop(0)
        return fake, results

    return asyncio.run(go())


def bodies(messages, kind):
    return [m for m in messages if m.WhichOneof("body") == kind]


def test_reports_carry_increasing_seqs_and_every_ack_is_timed():
    fake, results = run_against(Behaviour())
    assert len(fake.received) == AGENTS and results["counters"]["jobs_finished"] == AGENTS
    for messages in fake.received.values():
        numbered = [m for m in messages if m.WhichOneof("body") in ("interval", "job_status")]
        assert [m.seq for m in numbered] == list(range(1, INTERVALS + 3))  # READY, intervals, FINISHED
        assert all(m.seq == 0 for m in bodies(messages, "heartbeat") + bodies(messages, "hello"))
        intervals = bodies(messages, "interval")
        starts = [m.interval.report.interval_start_ms for m in intervals]
        assert [s - starts[0] for s in starts] == [k * INTERVAL_MS for k in range(INTERVALS)]
        assert [m.interval.report.final for m in intervals] == [False] * (INTERVALS - 1) + [True]
    counters = results["counters"]
    assert counters["outbox_outstanding_at_end"] == counters["outbox_dropped"] == 0
    assert results["controller_instances"] == ["controller-1"]
    assert sum(results["sent"][str(s)][0] for s in map(int, results["sent"])) == AGENTS * INTERVALS


def test_the_total_row_goes_only_to_a_controller_that_names_its_instance():
    for behaviour, expected in [(Behaviour(), True), (Behaviour(instance="", ack=False), False)]:
        fake, results = run_against(behaviour)
        for messages in fake.received.values():
            for interval in bodies(messages, "interval"):
                keys = [(s.target, s.request) for s in interval.interval.report.stats]
                assert (keys[-1] == ("*", "*")) is expected and len(keys) == 2 + expected
        assert results["counters"]["agents_sending_total_row"] == AGENTS * expected


def test_without_acks_messages_stay_outstanding_up_to_the_bound():
    _, results = run_against(Behaviour(instance="", ack=False))
    assert results["counters"]["outbox_outstanding_at_end"] == AGENTS * (INTERVALS + 2)
    assert results["counters"].get("acks", 0) == 0 and results["ack_latency"] == ""


def test_stop_job_ends_with_a_final_interval_and_stopped():
    fake, results = run_against(Behaviour(stop_after_intervals=1))
    assert results["counters"]["jobs_stopped"] == AGENTS
    for messages in fake.received.values():
        intervals = bodies(messages, "interval")
        assert len(intervals) < INTERVALS and intervals[-1].interval.report.final
        assert bodies(messages, "job_status")[-1].job_status.state == agent_pb2.JOB_STATE_STOPPED


@pytest.mark.parametrize("mode, expected", [(TotalRow.ALWAYS, True), (TotalRow.NEVER, False)])
def test_total_row_can_be_forced(mode, expected):
    fake, _ = run_against(Behaviour(instance="", ack=False) if expected else Behaviour(), total_row=mode)
    for messages in fake.received.values():
        assert all((m.interval.report.stats[-1].target == "*") is expected for m in bodies(messages, "interval"))
