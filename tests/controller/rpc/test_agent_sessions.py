"""A session may only touch its own jobs' runs, over real gRPC against a real controller
server: a stranger's reports, job states, engine failures, spool drops and artifacts for
another agent's job are refused (and acknowledged, so that they are not sent again), while
the job's own agent is heard, its spool drop after its job ended included, and the partial
file of an artifact it never finished is gone once the run closes."""

from __future__ import annotations

import asyncio
import json

import grpc

from loadfleet.controller.cli.client import RunClient
from loadfleet.controller.rpc.server import ControllerServer
from loadfleet.controller.service.controller import Controller
from loadfleet.v1 import agent_pb2, stats_pb2
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow, total_row
from support.handsession import HandSession, zipped

TARGET = "http://127.0.0.2:9"
PLAN = f"""
name: sessions
duration_s: 3
targets: [{{url: "{TARGET}"}}]
workload: {{requests: [{{name: r, path: /}}]}}
load: {{model: closed, clients: 1}}
agents: {{count: 1, wait_s: 10, labels: {{role: load}}}}
"""


def interval(job_id: str, start_ms: int, requests: int, *, final: bool = False) -> agent_pb2.AgentInterval:
    rows = [StatsRow(TARGET, "r", requests=requests, status=[0, requests, 0, 0, 0], histogram=Histogram.of([1000]))]
    report = stats_pb2.IntervalReport(
        interval_start_ms=start_ms,
        interval_ms=1000,
        final=final,
        stats=[r.to_proto() for r in (*rows, total_row(rows))],
    )
    return agent_pb2.AgentInterval(job_id=job_id, report=report)


def test_a_stranger_cannot_touch_another_agents_run_and_the_runs_own_agent_can(tmp_path):
    report_zip = zipped({"sim-1/index.html": b"<html>report</html>"})

    async def go() -> str:
        server = ControllerServer(Controller(runs_dir=tmp_path), "127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(server.address) as channel, RunClient(server.address) as client:
                own, stranger = HandSession(channel), HandSession(channel)
                await own.hello("a1", {"role": "load"})
                await stranger.hello("x")
                started = await client.start_run(PLAN)
                spec = (await own.until("assignment")).assignment.spec
                job, t0 = spec.job_id, spec.start_at_ms

                await stranger.send(
                    engine_failure=agent_pb2.EngineFailure(job_id=job, engine=0, pid=1, how="killed", stderr_tail="x")
                )
                await stranger.send(
                    spool_drop=agent_pb2.SpoolDrop(job_id=job, messages=5, reports=5, requests=123456, cause="x")
                )
                await stranger.send(artifact=agent_pb2.Artifact(job_id=job, name="r.zip", data=report_zip, last=True))
                await stranger.send(artifact=agent_pb2.Artifact(job_id=job, name="p.zip", data=b"PK" * 1000))
                await stranger.send(job_status=agent_pb2.JobStatus(job_id=job, state=agent_pb2.JOB_STATE_FAILED))
                await stranger.send(interval=interval(job, t0, 1000))
                await stranger.acked_through(6)  # refused, and settled: never sent again

                await own.send(artifact=agent_pb2.Artifact(job_id=job, name="r.zip", data=report_zip, last=True))
                await own.send(artifact=agent_pb2.Artifact(job_id=job, name="never-ends.zip", data=b"PK" * 1000))
                for i in range(3):
                    await own.send(interval=interval(job, t0 + i * 1000, 10, final=i == 2))
                await own.send(job_status=agent_pb2.JobStatus(job_id=job, state=agent_pb2.JOB_STATE_FINISHED))
                # Its job has ended, its run has not: the agent still speaks for it.
                await own.send(spool_drop=agent_pb2.SpoolDrop(job_id=job, messages=1, cause="its spool was full"))
                await own.acked_through(own.seq)
                async for update in client.watch(started.run_id):
                    if update.HasField("finished"):
                        assert json.loads(update.finished.summary_json)["total"]["figures"]["requests"] == 30
            return started.run_id
        finally:
            await server.stop()

    run_dir = tmp_path / asyncio.run(go())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    assert "engine_failed" not in kinds and "job_failed" not in kinds, events
    drops = [e for e in events if e["kind"] == "spool_dropped"]
    assert len(drops) == 1 and "agent a1 " in drops[0]["text"], drops
    assert not any(e["agent_id"] == "x" or " x " in e["text"] for e in events), events
    assert sorted(p.name for p in (run_dir / "gatling").iterdir()) == ["a1"], "nothing of the stranger's"
    assert (run_dir / "gatling" / "a1" / "sim-1" / "index.html").exists()
    assert not list(run_dir.rglob("*.part")), "the partial file of an artifact never finished is removed"
