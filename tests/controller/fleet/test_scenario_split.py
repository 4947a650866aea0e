"""split_scenarios: each scenario split exactly over every engine slot, rotated per scenario,
users numbered disjointly across scenarios."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from loadfleet.controller.fleet.scheduler import AgentShare, ScenarioShare, split_scenarios
from loadfleet.controller.model.load import IDLE_LOAD, Load, LoadModel


def scenario_shares(shares: list[AgentShare], k: int) -> list[ScenarioShare]:
    return [s for a in shares for e in a.engines if (s := e.scenarios[k]) is not None]


@settings(max_examples=60, deadline=None)
@given(
    cores=st.lists(st.integers(1, 64), min_size=1, max_size=12).filter(lambda c: sum(c) <= 300),
    # split_load leaves a slot idle when its budget share is 0 (a budget below the slot count
    # drops clients): the budget is at least 300 here. Fewer clients than slots keep the budget.
    clients=st.integers(1, 2000),
    budget=st.one_of(st.just(0), st.integers(300, 100_000)),
    rate=st.floats(0.5, 5000),
    users=st.integers(1, 900),
)
def test_every_scenario_adds_up_exactly_and_users_never_overlap(
    cores: list[int], clients: int, budget: int, rate: float, users: int
) -> None:
    agents = [(f"a{i}", c) for i, c in enumerate(cores)]
    loads = [
        (Load(LoadModel.CLOSED, clients=clients), budget),
        (Load(LoadModel.OPEN, rate=rate), 0),
        (Load(LoadModel.USERS, users=users, spawn_rate=5), 0),
    ]
    shares = split_scenarios(loads, agents)
    assert all(e.load == IDLE_LOAD and len(e.scenarios) == 3 for a in shares for e in a.engines)
    closed, opened, population = (scenario_shares(shares, k) for k in range(3))
    assert sum(s.load.clients for s in closed) == clients
    assert sum(s.max_requests for s in closed) == budget
    assert math.isclose(sum(s.load.rate for s in opened), rate, rel_tol=1e-9)
    assert sum(s.load.users for s in population) == users
    ranges = sorted((s.first_user, s.first_user + s.load.clients + s.load.users) for s in closed + population)
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(ranges))  # disjoint
    assert ranges[-1][1] == clients + users


def test_exact_for_every_slot_count_from_1_to_300() -> None:
    for n in range(1, 301):
        shares = split_scenarios(
            [(Load(LoadModel.CLOSED, clients=300), 1000), (Load(LoadModel.CLOSED, clients=n), 0)], [("a", n)]
        )
        assert sum(s.load.clients for s in scenario_shares(shares, 0)) == 300
        assert sum(s.max_requests for s in scenario_shares(shares, 0)) == 1000
        assert sum(s.load.clients for s in scenario_shares(shares, 1)) == n


def test_rotation_spreads_a_3_client_and_a_2_client_scenario() -> None:
    shares = split_scenarios(
        [(Load(LoadModel.CLOSED, clients=3), 0), (Load(LoadModel.CLOSED, clients=2), 0)], [("a", 2), ("b", 3)]
    )
    per_engine = [sum(s.load.clients for s in e.scenarios if s) for a in shares for e in a.engines]
    assert per_engine == [1, 1, 1, 1, 1]  # without rotation: 2, 2, 1, 0, 0
    assert [a.agent_id for a in shares] == ["a", "b"]


def test_an_agent_with_no_share_of_any_scenario_gets_no_job() -> None:
    shares = split_scenarios(
        [(Load(LoadModel.CLOSED, clients=1), 0), (Load(LoadModel.CLOSED, clients=1), 0)], [("a", 1), ("b", 1), ("c", 1)]
    )
    assert [a.agent_id for a in shares] == ["a", "b"]
