"""Rows handed to a running engine (a lost share's, EngineShare.feed_added) through the agent's
JobRunner and the real engine, against a loopback server the test starts: the engine takes its
own rows, then the handed ones, each once, and reports both as ranges of the file."""

import asyncio

import pytest

from loadfleet.agent.engine import find_engine
from loadfleet.agent.job import JobRunner, Outcome
from loadfleet.v1 import agent_pb2, job_pb2
from loadfleet.wire.feedranges import join_ranges
from support.okserver import ok_server

pytestmark = pytest.mark.process


def rows(first: int, count: int) -> list[job_pb2.FeedRow]:
    return [job_pb2.FeedRow(cells=[f"u{first + i}"]) for i in range(count)]


def test_an_engine_takes_rows_handed_to_it_after_its_own_each_once():
    with ok_server() as (url, paths):
        open_rate = job_pb2.LoadShare(open=job_pb2.OpenModel(rate_per_s=40))
        spec = job_pb2.JobSpec(
            job_id="j",
            targets=[job_pb2.Target(url=url, weight=1)],
            load=open_rate,
            requests=[job_pb2.RequestSpec(name="u", method="GET", path="/u/${accounts.user}", weight=1)],
            session=job_pb2.Session(steps=[job_pb2.SessionStep(request=0)], repeat=1),
            duration_ms=2500,
            interval_ms=500,
            feed=job_pb2.FeedSpec(
                name="accounts",
                columns=["user"],
                mode=job_pb2.FEED_MODE_UNIQUE,
                on_exhausted=job_pb2.FEED_EXHAUSTED_STOP_USER,
                first_row=10,
                rows=rows(10, 5),
                file_rows=100,
            ),
        )
        assignment = agent_pb2.Assignment(spec=spec, engines=[agent_pb2.EngineShare(load=open_rate)])
        sent = []

        async def run() -> Outcome:
            runner = JobRunner(assignment, find_engine(), sent.append)
            job = asyncio.create_task(runner.run())
            await asyncio.sleep(1.5)  # its 5 rows are taken in the first 0.2 s of load
            handed = [
                job_pb2.FeedBlock(first_row=60, rows=rows(60, 3)),
                job_pb2.FeedBlock(first_row=90, rows=rows(90, 2)),
            ]
            await runner.adjust([agent_pb2.EngineShare(load=open_rate, feed_added=handed)])
            return await job

        outcome = asyncio.run(asyncio.wait_for(run(), 30))
    assert outcome is Outcome.FINISHED, [m.job_status.message for m in sent if m.HasField("job_status")]
    users = [int(path.removeprefix("/u/u")) for path in paths]
    assert users == [10, 11, 12, 13, 14, 60, 61, 62, 90, 91]  # its own, then the handed rows in order, once
    totals = [s for m in sent if m.HasField("interval") for s in m.interval.report.stats if s.target == "*"]
    taken = [(r.start, r.end) for s in totals for r in s.feed_taken]
    assert join_ranges(taken) == [(10, 15), (60, 63), (90, 92)], taken
    assert sum(end - start for start, end in taken) == 10  # each row reported once, in the agent's totals
