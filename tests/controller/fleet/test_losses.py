"""A lost share split over the live engines: loads add up, budgets stay exact, staged loads
keep their engines' loads and hand over their budget only."""

from __future__ import annotations

from loadfleet.controller.fleet.losses import Loss, StepShares, redistributed
from loadfleet.controller.fleet.scheduler import EngineShare
from loadfleet.controller.model.load import Load, Stage
from loadfleet.controller.plan.model import LossPolicy


def shares(*clients, budget=0):
    return tuple(EngineShare(Load("closed", clients=c), budget) for c in clients)


def test_a_lost_share_is_split_over_live_engines_and_budgets_stay_exact():
    current = {"a1": shares(3, 3, budget=100), "a2": shares(3, budget=100)}
    out = redistributed(Load("closed", clients=5), 101, current, {"a1": (0, 1), "a2": (0,)})
    clients = [e.load.clients for a in ("a1", "a2") for e in out[a]]
    assert clients == [5, 5, 4] and sum(clients) == 9 + 5
    assert sum(e.max_requests for a in out for e in out[a]) == 300 + 101


def test_dead_engines_and_agents_without_live_engines_take_nothing():
    current = {"a1": shares(3, 3, budget=100), "a2": shares(3, budget=100)}
    out = redistributed(Load("closed", clients=2), 10, current, {"a1": (1,), "a2": ()})
    assert list(out) == ["a1"] and [e.load.clients for e in out["a1"]] == [3, 5]
    assert [e.max_requests for e in out["a1"]] == [100, 110]
    assert redistributed(Load("closed", clients=2), 10, current, {}) == {}


def test_open_and_users_models_add_rates_and_populations():
    current = {"a1": (EngineShare(Load("open", rate=100.0, max_connections=8)),)}
    (engine,) = redistributed(Load("open", rate=50.0, max_connections=4), 0, current, {"a1": (0,)})["a1"]
    assert (engine.load.rate, engine.load.max_connections) == (150.0, 12)
    current = {"a1": (EngineShare(Load("users", users=10, spawn_rate=2.0)),)}
    (engine,) = redistributed(Load("users", users=5, spawn_rate=1.0), 0, current, {"a1": (0,)})["a1"]
    assert (engine.load.users, engine.load.spawn_rate) == (15, 3.0)


def test_a_staged_load_hands_over_its_budget_only():
    staged = Load("closed", clients=2, stages=(Stage(10, 8),))
    current = {"a1": (EngineShare(staged, 50), EngineShare(staged, 50))}
    out = redistributed(staged, 30, current, {"a1": (0, 1)})
    assert [e.load for e in out["a1"]] == [staged, staged] and [e.max_requests for e in out["a1"]] == [65, 65]


def test_a_loss_says_what_it_lost_and_what_became_of_it():
    loss = Loss(
        step="main",
        agent_id="a2",
        engine=None,
        at_ms=0,
        policy=LossPolicy.REDISTRIBUTE,
        load="4 clients",
        budget_left=1203,
        unreported_bound=310,
        taken_by=3,
        moved_load=True,
    )
    assert loss.describe() == (
        "agent a2 lost: its share (4 clients) and 1,203 requests of its budget went to 3 other "
        "agent(s); up to 310 requests it sent unreported may have reached the servers"
    )
    assert "abort: the run ends" in Loss("main", "a2", 1, 0, LossPolicy.ABORT, "2 clients", 0, 0).describe()


def test_a_lost_agent_leaves_its_unreported_budget_and_bounds_what_it_sent_unreported():
    steps = StepShares("j", "main", 1000, {"a1": shares(3, 3, budget=100), "a2": shares(3, budget=100)})
    load, left, bound = steps.lose_agent("a1", reported=50, busiest=20, silent_ms=4500)
    assert (load.clients, left) == (6, 150)
    assert bound == 20 * (5 + 1)  # its busiest interval, over every interval it may have run unreported
    assert steps.live("a1") == () and steps.lose_agent("a1", 50, 20, 4500) is None
    _, left, bound = steps.lose_agent("a2", reported=95, busiest=40, silent_ms=10_000)
    assert (left, bound) == (5, 5)  # never past its own budget


def test_a_dead_engine_hands_on_its_own_share_and_its_agent_then_only_the_rest():
    steps = StepShares("j", "main", 1000, {"a1": shares(3, 3, budget=100)})
    load, left, bound = steps.lose_engine("a1", 1, reported=70, busiest=30)
    assert (load.clients, left, bound) == (3, 30, 15)
    assert steps.lose_engine("a1", 1, 70, 30) is None  # told once
    assert steps.live("a1") == (0,)
    load, left, _ = steps.lose_agent("a1", reported=160, busiest=30, silent_ms=0)
    assert (load.clients, left) == (3, 10)  # engine 0's budget of 100 less its 90 requests


def test_agents_whose_job_ended_or_that_were_lost_take_nothing_over():
    steps = StepShares("j", "main", 1000, {"a1": shares(1), "a2": shares(1, 1), "a3": shares(1)})
    steps.ended("a1")
    steps.lose_agent("a3", 0, 0, 0)
    assert steps.takers({"a1", "a2", "a3"}) == {"a2": (0, 1)}


def test_an_engine_taking_a_lost_share_keeps_its_first_user():
    current = {"a1": (EngineShare(Load("closed", clients=3), first_user=7),)}
    out = redistributed(Load("closed", clients=2), 0, current, {"a1": (0,)})
    assert out["a1"][0].load.clients == 5 and out["a1"][0].first_user == 7
