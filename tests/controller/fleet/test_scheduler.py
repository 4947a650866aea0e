import time

import pytest

from loadfleet.controller.fleet.scheduler import (
    MAX_ENGINES_PER_AGENT,
    barrier_start_ms,
    split_over_engines,
    users_of,
)
from loadfleet.controller.model.load import Load, Stage, split_exact


@pytest.mark.parametrize(
    "total, weights, expected",
    [
        (10, [1, 1], [5, 5]),
        (10, [3, 1], [8, 2]),  # 7.5 / 2.5: the tie goes to the first
        (7, [2, 2, 2], [3, 2, 2]),
        (1, [4, 4], [1, 0]),
        (100, [1, 2, 3, 4], [10, 20, 30, 40]),
        (0, [1, 5], [0, 0]),
    ],
)
def test_split_exact_sums_and_is_proportional(total, weights, expected):
    assert split_exact(total, weights) == expected
    assert sum(split_exact(total, weights)) == total


def test_split_needs_a_positive_weight():
    with pytest.raises(ValueError):
        split_exact(3, [0, 0])


@pytest.mark.parametrize("clients, budget", [(2, 1000), (1, 7), (3, 10), (5, 1001)])
def test_a_budget_goes_whole_to_the_engines_with_clients_when_clients_are_fewer_than_slots(clients, budget):
    # 2 clients on 4 cores: the 2 engines that send carry the whole budget (it once gave
    # 250 to each of 4 slots and dropped the 2 idle ones' 500, so the run stopped at half).
    shares = split_over_engines(Load("closed", clients=clients), budget, [("a", 4), ("b", 2)])
    engines = [e for s in shares for e in s.engines]
    assert sum(e.max_requests for e in engines) == budget
    assert sum(e.load.clients for e in engines) == clients
    assert all(e.load.clients > 0 and e.max_requests > 0 for e in engines)


def test_agents_with_no_share_are_left_out():
    shares = split_over_engines(Load("closed", clients=3), 0, [("a", 2), ("b", 2), ("c", 2), ("d", 2)])
    assert [(s.agent_id, s.load.clients, len(s.engines)) for s in shares] == [("a", 2, 2), ("b", 1, 1)]


@pytest.mark.parametrize(
    "load",
    [
        Load("closed", clients=10, stages=(Stage(5, 3), Stage(5, 7))),
        Load("open", rate=1000, max_connections=10, stages=(Stage(10, 0),)),
        Load("users", users=99, spawn_rate=7),
    ],
)
def test_every_total_stays_exact_across_engine_slots(load):
    agents = [("a", 3), ("b", 1), ("c", 2)]
    shares = split_over_engines(load, 1001, agents)
    parts = [e for s in shares for e in s.engines]
    assert sum(e.max_requests for e in parts) == 1001
    assert sum(e.load.clients for e in parts) == load.clients
    assert sum(e.load.users for e in parts) == load.users
    assert sum(e.load.rate for e in parts) == pytest.approx(load.rate)
    assert sum(e.load.spawn_rate for e in parts) == pytest.approx(load.spawn_rate)
    assert sum(e.load.max_connections for e in parts) == load.max_connections
    for i, stage in enumerate(load.stages):
        assert sum(e.load.stages[i].target for e in parts) == pytest.approx(stage.target)
    # One engine slot per core: agent a (3 cores) carries three times agent b's budget.
    budget = {s.agent_id: s.max_requests for s in shares}
    assert budget["a"] in (500, 501) and budget["b"] in (166, 167)


@pytest.mark.parametrize(
    "now, interval, expected", [(10_000, 1000, 12_000), (10_001, 1000, 13_000), (10_999, 500, 13_000)]
)
def test_barrier_is_an_interval_boundary_at_least_the_lead_ahead(now, interval, expected):
    assert barrier_start_ms(now, interval, lead_ms=2000) == expected


def test_the_work_of_a_split_is_bounded_by_the_engines_an_agent_may_run_not_by_its_claim():
    """Issue 28 B6: 1,000,000 claimed cores built 1,000,000 slots (8.2 s, 268 MB)."""
    started = time.perf_counter()
    shares = split_over_engines(Load("closed", clients=5000), 0, [("rogue", 2**32 - 1), ("a", 2)])
    assert time.perf_counter() - started < 1.0
    assert [len(s.engines) for s in shares] == [MAX_ENGINES_PER_AGENT, 2]
    assert sum(s.load.clients for s in shares) == 5000


def first_users(shares):
    return [(e.first_user, users_of(e.load)) for s in shares for e in s.engines]


def test_each_engine_numbers_its_users_on_from_the_engines_before_it():
    """${user} is unique fleet-wide: an engine's first user is the sum of the users the
    engines before it (in agent order, then the agent's own) can have."""
    shares = split_over_engines(Load("closed", clients=10), 0, [("a", 3), ("b", 1), ("c", 2)])
    assert first_users(shares) == [(0, 2), (2, 2), (4, 2), (6, 2), (8, 1), (9, 1)]
    users = split_over_engines(Load("users", users=5, spawn_rate=1), 0, [("a", 2), ("b", 2)])
    assert first_users(users) == [(0, 2), (2, 1), (3, 1), (4, 1)]


def test_an_engine_whose_clients_ramp_up_is_given_room_for_its_peak():
    shares = split_over_engines(Load("closed", clients=2, stages=(Stage(5, 6), Stage(5, 0))), 0, [("a", 2)])
    assert first_users(shares) == [(0, 3), (3, 3)]
    assert users_of(Load("users", users=2, stages=(Stage(5, 2.5),))) == 3, "a level between users, rounded up"


def test_the_open_model_numbers_no_users():
    shares = split_over_engines(Load("open", rate=100), 0, [("a", 2), ("b", 1)])
    assert first_users(shares) == [(0, 0), (0, 0), (0, 0)]
