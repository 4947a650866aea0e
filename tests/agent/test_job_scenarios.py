"""An agent's job with scenarios: each engine's spec, adjust and failure counts per scenario."""

import asyncio

from loadfleet.agent.job import JobRunner, engine_specs
from loadfleet.v1 import agent_pb2, engine_pb2, job_pb2, stats_pb2


def closed(n):
    return job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=n))


def scenario_spec():
    def one(name, clients):
        job = job_pb2.JobSpec(targets=[job_pb2.Target(url="http://127.0.0.1:1", weight=1)], load=closed(clients))
        return job_pb2.ScenarioSpec(name=name, job=job)

    return job_pb2.JobSpec(job_id="j", duration_ms=3000, scenarios=[one("browse", 4), one("buy", 2)])


def share(*per_scenario):
    """(scenario, clients, max_requests, first_user) per scenario share of one engine."""
    return agent_pb2.EngineShare(
        scenarios=[
            agent_pb2.ScenarioShare(scenario=i, load=closed(n), max_requests=b, first_user=u)
            for i, n, b, u in per_scenario
        ]
    )


def two_engines():
    return agent_pb2.Assignment(
        spec=scenario_spec(), engines=[share((0, 3, 30, 0), (1, 2, 20, 0)), share((0, 1, 10, 3))]
    )


def test_each_engine_gets_its_share_of_each_scenario_and_an_absent_one_idles_at_level_0():
    first, second = engine_specs(two_engines())
    assert [(s.name, s.job.load.closed.clients, s.job.max_requests) for s in first.scenarios] == [
        ("browse", 3, 30),
        ("buy", 2, 20),
    ]
    assert [(s.job.load.closed.clients, s.job.first_user) for s in second.scenarios] == [(1, 3), (0, 0)]
    assert second.scenarios[1].job.load.WhichOneof("model") == "closed"  # the scenario's model, idle


class FakeEngine:
    def __init__(self):
        self.commands = []

    async def adjust(self, load, max_requests):
        self.commands.append(("adjust", load.closed.clients, max_requests))

    async def adjust_scenario(self, scenario, load, max_requests):
        self.commands.append((scenario, load.closed.clients, max_requests))

    async def append_rows(self, blocks):
        self.commands.append(("rows", [(b.first_row, len(b.rows)) for b in blocks]))


def test_adjust_sends_one_scenario_adjust_per_changed_scenario_share():
    runner = JobRunner(two_engines(), "unused", lambda m: None)
    engines = [FakeEngine(), FakeEngine()]
    runner._engines[:] = engines
    runner._live.update({0, 1})
    moved = [share((0, 3, 30, 0)), share((0, 2, 15, 3), (1, 1, 7, 2))]  # engine 0 loses "buy"
    asyncio.run(runner.adjust(moved))
    assert engines[0].commands == [(1, 0, 0)]
    assert engines[1].commands == [(0, 2, 15), (1, 1, 7)]
    asyncio.run(runner.adjust(moved))  # nothing changed since: nothing sent
    assert len(engines[0].commands) == 1 and len(engines[1].commands) == 2


def rows(start, **requests):
    return stats_pb2.IntervalReport(
        interval_start_ms=start,
        interval_ms=1000,
        stats=[stats_pb2.IntervalStats(scenario=k, target="t", request="r", requests=v) for k, v in requests.items()],
    )


class DyingEngine:
    pid = 4242
    returncode = 1

    def __init__(self, reports):
        self._events = [engine_pb2.EngineEvent(interval=r) for r in reports]

    async def next_event(self):
        return self._events.pop(0) if self._events else None

    async def wait(self):
        return 1

    def stderr_tail(self):
        return "boom"

    def kill(self):
        pass


def test_a_failed_engine_reports_what_each_scenario_share_reported_and_totals_are_over_scenarios():
    sent = []
    runner = JobRunner(two_engines(), "unused", sent.append)
    runner._engines.append(DyingEngine([rows(0, browse=5, buy=2), rows(1000, browse=4, stray=1)]))
    runner._live.add(0)
    asyncio.run(runner._follow(0, runner._engines[0]))
    failure = next(m.engine_failure for m in sent if m.HasField("engine_failure"))
    assert [(c.scenario, c.requests) for c in failure.reported] == [(0, 9), (1, 2)]
    assert failure.reported_requests == 12  # a name not in the spec is counted in no scenario (the bound)
    first = next(m.interval.report for m in sent if m.HasField("interval"))
    assert [(s.scenario, s.target, s.requests) for s in first.stats] == [
        ("browse", "t", 5),
        ("buy", "t", 2),
        ("*", "*", 7),
    ]
