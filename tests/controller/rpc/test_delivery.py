"""Acknowledged delivery over real gRPC: a hand-driven agent session against a real
controller server. Reports sent twice, out of order and again on a new session are merged
exactly once; acknowledgements ride on lease renewals, are cumulative, come only once an
interval is stored, and never pass a message the controller did not get."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from loadfleet.controller.cli.client import RunClient
from loadfleet.controller.rpc.agent_service import Delivery
from loadfleet.controller.rpc.server import ControllerServer
from loadfleet.controller.service.controller import Controller
from loadfleet.v1 import agent_pb2, stats_pb2
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow, total_row
from support.handsession import HandSession

TARGET = "http://127.0.0.2:9"
PLAN = f"""
name: delivery
duration_s: 4
targets: [{{url: "{TARGET}"}}]
workload: {{requests: [{{name: r, path: /}}]}}
load: {{model: closed, clients: 1}}
agents: {{count: 1, wait_s: 10}}
"""


def interval(seq: int, job_id: str, start_ms: int, requests: int, *, final: bool = False) -> agent_pb2.AgentMessage:
    rows = [
        StatsRow(
            TARGET, "r", requests=requests, status=[0, requests, 0, 0, 0], histogram=Histogram.of([1000 + requests])
        )
    ]
    report = stats_pb2.IntervalReport(
        interval_start_ms=start_ms,
        interval_ms=1000,
        final=final,
        stats=[r.to_proto() for r in (*rows, total_row(rows))],
    )
    return agent_pb2.AgentMessage(seq=seq, interval=agent_pb2.AgentInterval(job_id=job_id, report=report))


def test_resends_duplicates_and_reordering_are_merged_exactly_once(tmp_path):
    async def go():
        server = ControllerServer(Controller(runs_dir=tmp_path), "127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(server.address) as channel, RunClient(server.address) as client:
                first = HandSession(channel)
                welcome = await first.hello()
                started = await client.start_run(PLAN)
                assignment = (await first.until("assignment")).assignment
                job, t0 = assignment.spec.job_id, assignment.spec.start_at_ms
                await first.call.write(interval(1, job, t0 + 1000, 20))  # reordered
                await first.call.write(interval(2, job, t0, 10))
                await first.call.write(interval(2, job, t0, 10))  # the same message twice
                await first.acked_through(2)
                await first.call.write(interval(3, job, t0 + 2000, 30))
                await first.call.done_writing()  # the session breaks before 3 is acknowledged
                first.call.cancel()

                second = HandSession(channel)
                await second.hello()
                await second.call.write(interval(3, job, t0 + 2000, 30))  # the unacknowledged one, again
                await second.call.write(interval(4, job, t0 + 3000, 40, final=True))
                await second.call.write(
                    agent_pb2.AgentMessage(
                        seq=5, job_status=agent_pb2.JobStatus(job_id=job, state=agent_pb2.JOB_STATE_FINISHED)
                    )
                )
                await second.acked_through(5)
                summary = None
                async for update in client.watch(started.run_id):
                    if update.HasField("finished"):
                        summary = update.finished
            return welcome, json.loads(summary.summary_json)
        finally:
            await server.stop()

    welcome, summary = asyncio.run(go())
    assert welcome.controller_instance
    assert summary["total"]["figures"]["requests"] == 10 + 20 + 30 + 40


@pytest.mark.parametrize(
    "events, acks",
    [
        ([("recv", 5), ("recv", 6), ("settle", 6), ("settle", 5)], [None, 6]),  # settled out of order
        ([("recv", 5), ("recv", 7), ("settle", 5), ("settle", 7)], [5, None]),  # 6 never came: no ack past it
        ([("recv", 9), ("settle", 9), ("settle", 9)], [9, None]),  # settling twice acknowledges once
    ],
)
def test_acknowledgements_are_cumulative_and_never_pass_a_gap(events, acks):
    delivery = Delivery("a1")
    got = []
    for what, seq in events:
        if what == "recv":
            delivery.received(seq)
        else:
            got.append(delivery.settled(seq))
    assert got == acks
