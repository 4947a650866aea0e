"""A unique feed's rows split over the fleet: the controller gives each agent a contiguous slice
(fleet/feedsplit.py), the agent splits it over its engines, and the engines' slices tile the file
exactly, with no row held twice; circular and random feeds give every engine every row."""

import pytest

from loadfleet.agent.job import engine_specs
from loadfleet.controller.fleet.feedsplit import feed_slices
from loadfleet.controller.fleet.jobs import JobAssignment
from loadfleet.controller.fleet.scheduler import split_over_engines
from loadfleet.controller.plan.feeds import Feed, FeedMode
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.rpc.jobconvert import assignment_to_proto
from loadfleet.v1 import job_pb2

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
