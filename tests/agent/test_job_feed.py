"""A unique feed's rows split over the fleet: the controller gives each agent a contiguous slice
(fleet/feedsplit.py), the agent splits it over its engines, and the engines' slices tile the file
exactly, with no row held twice; circular and random feeds give every engine every row. Rows
handed on after a loss (EngineShare.feed_added) reach each engine once, before its new load."""

import asyncio

import pytest

from loadfleet.agent.job import JobRunner, engine_specs
from loadfleet.controller.fleet.feedsplit import feed_slices
from loadfleet.controller.fleet.jobs import JobAssignment
from loadfleet.controller.fleet.scheduler import split_over_engines
from loadfleet.controller.plan.feeds import Feed, FeedMode
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.rpc.jobconvert import assignment_to_proto
from loadfleet.v1 import agent_pb2, job_pb2

PLAN = """
duration_s: 5
targets: [{url: "http://127.0.0.2:8080"}]
workload:
  feed: {name: a, mode: MODE, columns: [user], rows_csv: "ROWS"}
  requests: [{name: u, path: "/u/${a.user}"}]
  session: {steps: [{request: u}]}
load: {model: closed, clients: 23}
"""


def engine_feeds(rows: int, mode: str, agents: list[tuple[str, int]]) -> list[job_pb2.FeedSpec]:
    text = PLAN.replace("MODE", mode).replace("ROWS", "".join(f"u{i}\\n" for i in range(rows)))
    plan = parse_plan(text)
    shares = split_over_engines(plan.load, 0, agents)
    slices = feed_slices(plan.feed, shares)
    feeds = []
    for share in shares:
        assignment = JobAssignment("r", plan, share.engines, 2**41, feed_rows=slices.get(share.agent_id, (0, 0)))
        feeds += [spec.feed for spec in engine_specs(assignment_to_proto(assignment).assignment)]
    return feeds


@pytest.mark.parametrize("rows", [1, 8, 9, 101])
def test_unique_rows_tile_the_file_over_every_engine_of_every_agent(rows):
    feeds = engine_feeds(rows, "unique", [("a", 3), ("b", 2), ("c", 4)])
    assert len(feeds) == 9
    held = [(f.first_row, f.first_row + len(f.rows)) for f in feeds]
    assert [start for start, _ in held] == [0] + [end for _, end in held[:-1]], held
    assert held[-1][1] == rows
    sizes = [end - start for start, end in held]
    assert max(sizes) - min(sizes) <= 1, sizes  # split as budgets are: whole numbers, exact
    cells = [row.cells[0] for f in feeds for row in f.rows]
    assert cells == [f"u{i}" for i in range(rows)]
    assert {f.file_rows for f in feeds} == {rows}


@pytest.mark.parametrize("mode", ["circular", "random"])
def test_circular_and_random_feeds_give_every_engine_every_row(mode):
    feeds = engine_feeds(5, mode, [("a", 2), ("b", 1)])
    assert [(f.first_row, len(f.rows)) for f in feeds] == [(0, 5)] * 3


def test_no_slices_without_a_unique_feed():
    shares = split_over_engines(parse_plan(PLAN.replace("MODE", "random").replace("ROWS", "x")).load, 0, [("a", 1)])
    assert feed_slices(None, shares) == {}
    assert feed_slices(Feed("a", ("u",), (("x",),), FeedMode.CIRCULAR), shares) == {}


class RecordingEngine:
    """What the job sends an engine when its share changes."""

    def __init__(self):
        self.commands = []

    async def adjust(self, load, max_requests):
        self.commands.append(("adjust", load.closed.clients, max_requests))

    async def adjust_scenario(self, scenario, load, max_requests):
        self.commands.append(("scenario", scenario))

    async def append_rows(self, blocks):
        self.commands.append(("rows", [(b.first_row, [r.cells[0] for r in b.rows]) for b in blocks]))


def block(first_row: int, count: int) -> job_pb2.FeedBlock:
    rows = [job_pb2.FeedRow(cells=[f"u{first_row + i}"]) for i in range(count)]
    return job_pb2.FeedBlock(first_row=first_row, rows=rows)


def test_rows_handed_on_reach_the_engine_once_and_before_the_load_that_takes_them():
    spec = job_pb2.JobSpec(job_id="j", load=job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=2)))
    assignment = agent_pb2.Assignment(spec=spec, engines=[agent_pb2.EngineShare(load=spec.load)])
    runner = JobRunner(assignment, "unused", lambda m: None)
    engine = RecordingEngine()
    runner._engines[:] = [engine]
    runner._live.add(0)
    three = job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=3))
    first = agent_pb2.EngineShare(load=three, feed_added=[block(40, 2)])
    asyncio.run(runner.adjust([first]))
    assert engine.commands == [("rows", [(40, ["u40", "u41"])]), ("adjust", 3, 0)]
    second = agent_pb2.EngineShare(load=three, feed_added=[block(40, 2), block(70, 1)])
    asyncio.run(runner.adjust([second]))  # a second loss: only its block is new
    assert engine.commands[2:] == [("rows", [(70, ["u70"])]), ("adjust", 3, 0)]
    asyncio.run(runner.adjust([second]))  # the same share again: no rows sent twice
    assert engine.commands[4:] == [("adjust", 3, 0)]
