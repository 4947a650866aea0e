"""A lost share split over the live engines: loads add up, budgets stay exact, staged loads
keep their engines' loads and hand over their budget only."""

from __future__ import annotations

from loadfleet.controller.fleet.handover import LostShare, redistributed
from loadfleet.controller.fleet.losses import Loss, StepShares
from loadfleet.controller.fleet.scheduler import EngineShare, ScenarioShare
from loadfleet.controller.model.load import IDLE_LOAD, Load, Stage
from loadfleet.controller.model.scenariospan import ScenarioSpan
from loadfleet.controller.plan.model import LossPolicy


def shares(*clients, budget=0):
    return tuple(EngineShare(Load("closed", clients=c), budget) for c in clients)


def lost(load: Load, budget_left: int = 0) -> LostShare:
    return LostShare(load, budget_left, 0, budgeted=budget_left > 0)


def used(requests: int, busiest: int):
    """What an agent reported in the step, whatever the scenario asked about."""
    return lambda scenario: (requests, busiest)


def test_a_lost_share_is_split_over_live_engines_and_budgets_stay_exact():
    current = {"a1": shares(3, 3, budget=100), "a2": shares(3, budget=100)}
    out = redistributed(lost(Load("closed", clients=5), 101), current, {"a1": (0, 1), "a2": (0,)})
    clients = [e.load.clients for a in ("a1", "a2") for e in out[a]]
    assert clients == [5, 5, 4] and sum(clients) == 9 + 5
    assert sum(e.max_requests for a in out for e in out[a]) == 300 + 101


def test_dead_engines_and_agents_without_live_engines_take_nothing():
    current = {"a1": shares(3, 3, budget=100), "a2": shares(3, budget=100)}
    out = redistributed(lost(Load("closed", clients=2), 10), current, {"a1": (1,), "a2": ()})
    assert list(out) == ["a1"] and [e.load.clients for e in out["a1"]] == [3, 5]
    assert [e.max_requests for e in out["a1"]] == [100, 110]
    assert redistributed(lost(Load("closed", clients=2), 10), current, {}) == {}


def test_open_and_users_models_add_rates_and_populations():
    current = {"a1": (EngineShare(Load("open", rate=100.0, max_connections=8)),)}
    (engine,) = redistributed(lost(Load("open", rate=50.0, max_connections=4), 0), current, {"a1": (0,)})["a1"]
    assert (engine.load.rate, engine.load.max_connections) == (150.0, 12)
    current = {"a1": (EngineShare(Load("users", users=10, spawn_rate=2.0)),)}
    (engine,) = redistributed(lost(Load("users", users=5, spawn_rate=1.0), 0), current, {"a1": (0,)})["a1"]
    assert (engine.load.users, engine.load.spawn_rate) == (15, 3.0)


def test_a_staged_load_hands_over_its_budget_only():
    staged = Load("closed", clients=2, stages=(Stage(10, 8),))
    current = {"a1": (EngineShare(staged, 50), EngineShare(staged, 50))}
    out = redistributed(lost(staged, 30), current, {"a1": (0, 1)})
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
    (share,) = steps.lose_agent("a1", used(50, 20), silent_ms=4500)
    assert (share.load.clients, share.budget_left, share.scenario) == (6, 150, None)
    assert share.unreported_bound == 20 * (
        5 + 1
    )  # its busiest interval, over every interval it may have run unreported
    assert steps.live("a1") == () and steps.lose_agent("a1", used(50, 20), 4500) == []
    (share,) = steps.lose_agent("a2", used(95, 40), silent_ms=10_000)
    assert (share.budget_left, share.unreported_bound) == (5, 5)  # never past its own budget


def test_a_dead_engine_hands_on_its_own_share_and_its_agent_then_only_the_rest():
    steps = StepShares("j", "main", 1000, {"a1": shares(3, 3, budget=100)})
    (share,) = steps.lose_engine("a1", 1, {None: 70}, busiest=30)
    assert (share.load.clients, share.budget_left, share.unreported_bound) == (3, 30, 15)
    assert steps.lose_engine("a1", 1, {None: 70}, 30) == []  # told once
    assert steps.live("a1") == (0,)
    (share,) = steps.lose_agent("a1", used(160, 30), silent_ms=0)
    assert (share.load.clients, share.budget_left) == (3, 10)  # engine 0's budget of 100 less its 90 requests


def test_agents_whose_job_ended_or_that_were_lost_take_nothing_over():
    steps = StepShares("j", "main", 1000, {"a1": shares(1), "a2": shares(1, 1), "a3": shares(1)})
    steps.ended("a1")
    steps.lose_agent("a3", used(0, 0), 0)
    assert steps.takers({"a1", "a2", "a3"}) == {"a2": (0, 1)}


def test_an_engine_taking_a_lost_share_keeps_its_first_user():
    current = {"a1": (EngineShare(Load("closed", clients=3), first_user=7),)}
    out = redistributed(lost(Load("closed", clients=2), 0), current, {"a1": (0,)})
    assert out["a1"][0].load.clients == 5 and out["a1"][0].first_user == 7


# ---- a plan with scenarios: each scenario's share is lost and handed on on its own ----

BROWSE, BUY = Load("closed", clients=2), Load("open", rate=10.0)
SPANS = (ScenarioSpan("browse", 0, 60_000, "browse"), ScenarioSpan("buy", 10_000, 30_000, "buy"))


def two_scenarios(browse: int, buy: float, budget: int = 0, first_user: int = 0) -> EngineShare:
    """An engine's share: `browse` clients (0: idle in it) and `buy` requests/s with a budget."""
    return EngineShare(
        IDLE_LOAD,
        scenarios=(
            ScenarioShare(Load("closed", clients=browse), first_user=first_user) if browse else None,
            ScenarioShare(Load("open", rate=buy), budget) if buy else None,
        ),
    )


def test_a_lost_agent_loses_one_share_per_scenario_with_its_own_budget_and_use():
    steps = StepShares("j", "main", 1000, {"a1": (two_scenarios(2, 5.0, budget=100),)}, SPANS)
    reported = {"browse": (40, 8), "buy": (30, 6)}
    browse, buy = steps.lose_agent("a1", lambda scenario: reported[scenario], silent_ms=0)
    assert (browse.scenario, browse.load.clients, browse.budgeted) == (0, 2, False)
    assert (buy.scenario, buy.load.rate, buy.budget_left, buy.unreported_bound) == (1, 5.0, 70, 6)


def test_a_dead_engine_counts_each_scenario_by_what_that_scenario_reported():
    steps = StepShares(
        "j", "main", 1000, {"a1": (two_scenarios(2, 5.0, budget=100), two_scenarios(0, 5.0, 100))}, SPANS
    )
    (buy,) = steps.lose_engine("a1", 1, {1: 60}, busiest=10)
    assert (buy.scenario, buy.budget_left) == (1, 40)
    browse, buy = steps.lose_agent("a1", lambda s: {"browse": (20, 5), "buy": (90, 5)}[s], silent_ms=0)
    assert (browse.budget_left, buy.budget_left) == (0, 70)  # engine 0's 100 less its own 30


def test_a_scenario_share_moves_into_that_scenario_only_and_an_idle_engine_takes_its_users_numbers():
    current = {"a1": (two_scenarios(1, 0.0),), "a2": (two_scenarios(0, 4.0, budget=50),)}
    share = LostShare(Load("closed", clients=3), 0, 0, scenario=0, first_user=20)
    out = redistributed(share, current, {"a1": (0,), "a2": (0,)})
    a1, a2 = out["a1"][0].scenarios, out["a2"][0].scenarios
    assert a1[0].load.clients == 1 + 2 and a1[1] is None  # its other scenario untouched
    assert a2[0] == ScenarioShare(Load("closed", clients=1), 0, 20) and a2[1].load.rate == 4.0
    assert out["a1"][0].load == out["a2"][0].load == IDLE_LOAD


def test_an_ended_scenarios_share_is_not_handed_on():
    steps = StepShares("j", "main", 1000, {"a1": (two_scenarios(1, 5.0),)}, SPANS)
    browse, buy = steps.lose_agent("a1", used(0, 0), silent_ms=0)
    assert not steps.scenario_ended(browse, 45_000) and steps.scenario_ended(buy, 45_000)
    assert not steps.scenario_ended(lost(Load("closed", clients=1)), 10**12)  # a plain plan's: never
    loss = Loss(
        "main", "a1", None, 0, LossPolicy.REDISTRIBUTE, "5 requests/s", 0, 0, scenario="buy", scenario_ended=True
    )
    assert (
        loss.describe()
        == "scenario buy: agent a1 lost its share (5 requests/s) after its scenario had ended: nothing to hand on"
    )


def test_a_budget_goes_only_to_engines_that_run_the_scenario():
    """1 client of a budgeted scenario over 3 live engines, none of which ran it: the one that
    takes the client takes the whole budget, the others stay idle without any."""
    current = {"a1": (two_scenarios(0, 1.0), two_scenarios(0, 1.0)), "a2": (two_scenarios(0, 1.0),)}
    share = LostShare(Load("closed", clients=1), 30, 0, scenario=0, budgeted=True, first_user=4)
    out = redistributed(share, current, {"a1": (0, 1), "a2": (0,)})
    assert list(out) == ["a1"] and out["a1"][0].scenarios[0] == ScenarioShare(Load("closed", clients=1), 30, 4)
    assert out["a1"][1].scenarios[0] is None
