"""A Gatling job with scenarios on the agent's side: the hook's stats lines carry the scenario
into StatsRow.scenario, the one JVM gets the sum of the agent's engine shares per scenario,
what JobSimulation would run otherwise is refused per scenario, and a scenario's own targets
are checked against the allow-list like the job's."""

import asyncio
import json

import pytest

from loadfleet.agent.errors import JobRefused
from loadfleet.agent.gatling import EVENT_PREFIX, jvm_job, parse_event_line
from loadfleet.agent.gatling_journeys import journey_problems
from loadfleet.agent.guard import LoadPolicy
from loadfleet.agent.job import engine_specs
from loadfleet.v1 import agent_pb2, job_pb2
from loadfleet.wire.stats import StatsRow


def stats_line(*rows: dict) -> str:
    return EVENT_PREFIX + json.dumps({"interval": {"interval_start_ms": 1000, "interval_ms": 1000, "stats": rows}})


def test_a_stats_line_with_a_scenario_gives_rows_of_that_scenario():
    report = parse_event_line(
        stats_line(
            {"scenario": "browse", "target": "http://t:1", "request": "home", "requests": 3, "status_2xx": 3},
            {"scenario": "buy", "target": "http://t:1", "request": "pay", "requests": 2, "status_5xx": 2},
        )
    ).interval
    rows = [StatsRow.from_proto(s) for s in report.stats]
    assert [(r.scenario, r.request, r.requests, r.ok) for r in rows] == [
        ("browse", "home", 3, 3),
        ("buy", "pay", 2, 0),
    ]


def test_a_stats_line_without_a_scenario_is_a_plain_row():
    [row] = parse_event_line(stats_line({"target": "http://t:1", "request": "home", "requests": 1})).interval.stats
    assert StatsRow.from_proto(row).key == ("", "http://t:1", "home")


def closed(clients: int) -> job_pb2.LoadShare:
    return job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=clients, think=job_pb2.ThinkTime(fixed_ms=5)))


def opened(rate: float) -> job_pb2.LoadShare:
    return job_pb2.LoadShare(open=job_pb2.OpenModel(rate_per_s=rate, poisson=True))


def scenario(name: str, load: job_pb2.LoadShare, url: str = "http://127.0.0.2:8080") -> job_pb2.ScenarioSpec:
    job = job_pb2.JobSpec(
        targets=[job_pb2.Target(url=url, weight=1)],
        requests=[job_pb2.RequestSpec(name=name, path="/")],
        load=load,
    )
    return job_pb2.ScenarioSpec(name=name, job=job)


def three_scenarios() -> job_pb2.JobSpec:
    return job_pb2.JobSpec(
        job_id="g",
        driver=job_pb2.DRIVER_GATLING,
        duration_ms=3000,
        scenarios=[scenario("browse", closed(10)), scenario("buy", opened(6)), scenario("idle", closed(2))],
    )


def share(index: int, load: job_pb2.LoadShare, first_user: int = 0, budget: int = 0) -> agent_pb2.ScenarioShare:
    return agent_pb2.ScenarioShare(scenario=index, load=load, first_user=first_user, max_requests=budget)


def test_the_jvm_gets_the_sum_of_the_agents_engine_shares_per_scenario():
    spec = three_scenarios()
    engines = [
        agent_pb2.EngineShare(scenarios=[share(0, closed(3), first_user=7), share(1, opened(2.5))]),
        agent_pb2.EngineShare(scenarios=[share(0, closed(2), first_user=10), share(1, opened(1.5))]),
        agent_pb2.EngineShare(scenarios=[share(1, opened(1))]),
    ]
    job = jvm_job(spec, engine_specs(agent_pb2.Assignment(spec=spec, engines=engines)))
    browse, buy, idle = (s.job for s in job.scenarios)
    assert (browse.load.closed.clients, browse.load.closed.think.fixed_ms, browse.first_user) == (5, 5, 7)
    assert (buy.load.open.rate_per_s, buy.load.open.poisson) == (5.0, True)
    assert buy.load.WhichOneof("model") == "open" and browse.load.WhichOneof("model") == "closed"
    assert idle.load.WhichOneof("model") == "closed" and idle.load.closed.clients == 0  # left out by the JVM
    assert spec.scenarios[0].job.load.closed.clients == 10, "the assignment's spec is not changed"


def test_a_plain_job_goes_to_the_jvm_as_it_is():
    plain = job_pb2.JobSpec(job_id="p", load=closed(4))
    assert jvm_job(plain, [plain]) is plain


def test_a_journey_gatling_reads_otherwise_is_refused_naming_its_scenario():
    spec = three_scenarios()
    spec.scenarios[1].job.requests[0].extracts.add(var=0, json_path="$.items[?(@.ok)].id")
    [problem] = journey_problems(spec)
    assert problem.startswith("scenarios[1] (buy).requests[0] (buy).extracts[0].json_path"), problem


def test_a_users_project_with_scenarios_is_refused_before_it_is_built():
    spec = three_scenarios()
    spec.gatling.project, spec.gatling.simulation = "/srv/perf", "com.example.Home"
    with pytest.raises(JobRefused, match="scenarios runs on loadfleet's JobSimulation"):
        jvm_job(spec, engine_specs(agent_pb2.Assignment(spec=spec)))


def test_a_scenarios_targets_are_checked_and_given_their_addresses():
    spec = three_scenarios()
    job, [engine] = asyncio.run(LoadPolicy().confine(spec, [spec]))
    for confined in (job, engine):
        assert [list(s.job.targets[0].addresses) for s in confined.scenarios] == [["127.0.0.2:8080"]] * 3
    outside = three_scenarios()
    outside.scenarios[2].job.targets[0].url = "http://192.0.2.1:80"
    with pytest.raises(JobRefused, match=r"scenarios\[2\] \(idle\)\.targets\[0\] http://192.0.2.1:80"):
        asyncio.run(LoadPolicy().confine(outside, [outside]))
