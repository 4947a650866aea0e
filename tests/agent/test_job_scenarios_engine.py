"""A job of two scenarios run by the real engine through the agent's JobRunner, against a
loopback server the test starts: each scenario's rows, added up, are what the server served."""

import asyncio

import pytest

from loadfleet.agent.engine import find_engine
from loadfleet.agent.job import JobRunner, Outcome
from loadfleet.v1 import agent_pb2, job_pb2
from support.okserver import ok_server

pytestmark = pytest.mark.process


def scenario(name, url, budget):
    job = job_pb2.JobSpec(
        targets=[job_pb2.Target(url=url, weight=1)],
        load=job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=1)),
        requests=[job_pb2.RequestSpec(name=name, method="GET", path="/", weight=1)],
        duration_ms=1500,
        max_requests=budget,
    )
    return job_pb2.ScenarioSpec(name=name, job=job)


def test_two_scenarios_give_rows_per_scenario_that_add_up_to_the_servers_count():
    with ok_server() as (base, served):
        url = f"{base}/"
        spec = job_pb2.JobSpec(
            job_id="j",
            duration_ms=1500,
            interval_ms=500,
            scenarios=[scenario("browse", url, 0), scenario("buy", url, 0)],
        )
        shares = [
            agent_pb2.ScenarioShare(scenario=0, load=spec.scenarios[0].job.load, max_requests=60),
            agent_pb2.ScenarioShare(scenario=1, load=spec.scenarios[1].job.load, max_requests=25),
        ]
        assignment = agent_pb2.Assignment(spec=spec, engines=[agent_pb2.EngineShare(scenarios=shares)])
        sent = []
        outcome = asyncio.run(asyncio.wait_for(JobRunner(assignment, find_engine(), sent.append).run(), 30))
    assert outcome is Outcome.FINISHED, [m.job_status.message for m in sent if m.HasField("job_status")]
    stats = [s for m in sent if m.HasField("interval") for s in m.interval.report.stats]
    per_scenario = {}
    for s in stats:
        per_scenario[s.scenario] = per_scenario.get(s.scenario, 0) + s.requests
    assert per_scenario["browse"] == 60 and per_scenario["buy"] == 25  # each its own budget
    assert per_scenario["browse"] + per_scenario["buy"] == per_scenario["*"] == len(served)
