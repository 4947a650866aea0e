"""Scenarios in a plan (plan/scenarios.py): checked with paths, refused until the run path
takes them (issue 31), written back to YAML and read again unchanged."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.model.load import IDLE_LOAD, Load, LoadModel
from loadfleet.controller.plan import yamlsafe
from loadfleet.controller.plan.model import Plan, Request, Target
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.plan.scenarios import (
    DEFAULT_SCENARIO,
    MAX_SCENARIOS,
    Scenario,
    ScenarioTarget,
    scenarios_from_doc,
)
from loadfleet.controller.plan.shorthand import ShorthandError, shorthand_doc

SHOP = """
name: shop-mix
duration_s: 300
targets:
  - {name: web, url: "http://127.0.0.70:18801"}
  - {name: api, url: "http://127.0.0.71:18801", weight: 2}
scenarios:
  - name: browse
    targets: [web]
    workload:
      requests:
        - {name: home, path: /}
        - {name: product, path: /product.php?id=7, weight: 3}
      session: {steps: [{request: home}, {request: product, think: {uniform_ms: [1000, 3000]}}]}
    load: {model: closed, clients: 400}
  - name: checkout
    targets: [{name: api, weight: 1}]
    start_after_s: 60
    duration_s: 180
    workload:
      requests:
        - {name: pay, method: POST, path: /pay.php, body: "amount=10"}
    load: {model: open, rate: 50, poisson: true}
    budget: {requests: 9000}
"""


def problems_of(text: str) -> list[tuple[str, str]]:
    with pytest.raises(PlanError) as exc:
        parse_plan(textwrap.dedent(text))
    return [(p.path, p.message) for p in exc.value.problems]


def shop_doc() -> dict[str, Any]:
    doc = yamlsafe.load(SHOP)
    assert isinstance(doc, dict)
    return doc


def with_doc(doc: dict[str, Any]) -> str:
    return yamlsafe.dump(doc)


def test_a_good_scenario_plan_parses() -> None:
    plan = parse_plan(textwrap.dedent(SHOP))
    assert [s.name for s in plan.each_scenario()] == ["browse", "checkout"] and plan.requests == ()


def test_scenarios_read_from_the_document() -> None:
    browse, checkout = scenarios_from_doc(shop_doc())
    assert browse.name == "browse" and browse.targets == (ScenarioTarget("web", 1),)
    assert browse.load == Load(LoadModel.CLOSED, clients=400) and browse.session is not None
    assert checkout.targets == (ScenarioTarget("api", 1),) and checkout.max_requests == 9000
    assert (checkout.start_after_s, checkout.end_s(300), browse.end_s(300)) == (60, 240, 300)
    plan_targets = (Target("http://a", 1, "web"), Target("http://b", 2, "api"))
    assert checkout.targets_of(plan_targets) == (Target("http://b", 1, "api"),)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.update(load={"model": "closed", "clients": 1}), ("load", "move it to scenarios[i].load")),
        (lambda d: d.update(budget={"requests": 5}), ("budget", "move it to scenarios[i].budget")),
        (lambda d: d["scenarios"][1].update(name="browse"), ("scenarios[1].name", "also scenarios[0].name")),
        (lambda d: d["scenarios"][1]["targets"].__setitem__(0, "apí"), ("scenarios[1].targets[0]", "'apí'")),
        (lambda d: d["targets"][0].update(weight=0), ("scenarios[0].targets", "weight 0")),
        (lambda d: d["scenarios"][1].update(duration_s=300), ("scenarios[1].duration_s", "starts at 60 s")),
        (lambda d: d["scenarios"][0]["load"].pop("clients"), ("scenarios[0].load.clients", "needs 'clients'")),
        (
            lambda d: d["scenarios"][0]["workload"]["session"]["steps"][0].update(request="hom"),
            ("scenarios[0].workload.session.steps[0].request", "no request is named 'hom'"),
        ),
        (lambda d: d["targets"][1].pop("name"), ("scenarios[1].targets", "targets[1] has none")),
    ],
)
def test_each_problem_names_its_path(change: Any, expected: tuple[str, str]) -> None:
    doc = shop_doc()
    change(doc)
    found = problems_of(with_doc(doc))
    assert any(path == expected[0] and expected[1] in message for path, message in found), found


def test_bad_names_and_too_many_scenarios() -> None:
    doc = shop_doc()
    doc["scenarios"][0]["name"] = "Check Out"
    assert any(p == "scenarios[0]" or p.startswith("scenarios[0].name") for p, _ in problems_of(with_doc(doc)))
    doc = shop_doc()
    doc["scenarios"] = [dict(doc["scenarios"][0], name=f"s{i}") for i in range(MAX_SCENARIOS + 1)]
    assert any(p == "scenarios" and "16" in m for p, m in problems_of(with_doc(doc)))


def test_a_plain_plan_is_one_implicit_default_scenario() -> None:
    plan = Plan("p", 10, (Target("http://127.0.0.1:1"),), (Request("r", "/"),), Load(LoadModel.CLOSED, clients=3))
    (only,) = plan.each_scenario()
    assert (only.name, only.implicit, only.requests, only.load) == (DEFAULT_SCENARIO, True, plan.requests, plan.load)
    assert "scenarios" not in yamlsafe.load(plan.to_yaml())
    assert parse_plan(plan.to_yaml()) == plan


def test_a_scenario_plan_writes_scenarios_and_reads_back_equal() -> None:
    scenarios = scenarios_from_doc(shop_doc())
    targets = (Target("http://127.0.0.70:18801", 1, "web"), Target("http://127.0.0.71:18801", 2, "api"))
    plan = Plan("shop", 300, targets, (), IDLE_LOAD, scenarios=scenarios)
    assert plan.each_scenario() == scenarios
    doc = yamlsafe.load(plan.to_yaml())
    assert isinstance(doc, dict) and "workload" not in doc and "load" not in doc
    assert scenarios_from_doc(doc) == scenarios
    assert parse_plan(plan.to_yaml()).scenarios == scenarios


def test_a_plan_with_scenarios_holds_no_plan_level_load() -> None:
    scenario = Scenario("a", (Request("r", "/"),), Load(LoadModel.CLOSED, clients=1))
    with pytest.raises(AssertionError):
        Plan("p", 10, (Target("http://127.0.0.1:1"),), (Request("r", "/"),), IDLE_LOAD, scenarios=(scenario,))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d.update(stop={"latency": {"scenario": "chekout", "above_ms": 9, "for_s": 5}}),
            ("stop.latency.scenario", "'checkout'?"),
        ),
        (
            lambda d: d.update(thresholds=[{"metric": "error_pct", "scenario": "brwse", "below": 1}]),
            ("thresholds[0].scenario", "did you mean 'browse'?"),
        ),
        (
            lambda d: d.update(
                thresholds=[{"metric": "error_pct", "scenario": "checkout", "request": "product", "below": 1}]
            ),
            ("thresholds[0].request", "scenario checkout has no request 'product' (pay)"),
        ),
        (
            lambda d: (d.pop("duration_s"), d.update(sweep={"steps": [1, 2], "step_s": 10})),
            ("sweep.scenario", "name the one the sweep steps (browse, checkout)"),
        ),
    ],
)
def test_references_name_declared_scenarios(change: Any, expected: tuple[str, str]) -> None:
    doc = shop_doc()
    change(doc)
    found = problems_of(with_doc(doc))
    assert any(path == expected[0] and expected[1] in message for path, message in found), found


def test_a_plain_plan_names_no_scenario() -> None:
    plain = "targets: [{url: 'http://127.0.0.1:1'}]\nduration_s: 5\nworkload: {requests: [{path: /}]}\n"
    plain += "load: {model: closed, clients: 1}\nthresholds: [{metric: error_pct, scenario: default, below: 1}]\n"
    assert problems_of(plain) == [
        ("thresholds[0].scenario", "no scenario named 'default': the plan has no scenarios (leave scenario out)")
    ]


def test_the_threshold_shorthand_takes_a_scenario_before_its_target_or_request() -> None:
    doc = shorthand_doc("scenario=checkout:request=pay:p99_ms<300@step")
    assert (doc["scenario"], doc["request"], doc["below_ms"], doc["over"]) == ("checkout", "pay", 300, "step")
    assert shorthand_doc("scenario=browse:error_pct<1") == {"scenario": "browse", "metric": "error_pct", "below": 1}
    with pytest.raises(ShorthandError, match="scenario=NAME:"):
        shorthand_doc("scenario=:p99_ms<1")
    found = problems_of_cli(SHOP, "scenario=chekout:p99_ms<300")
    assert any(p.startswith("--threshold") and "did you mean 'checkout'?" in m for p, m in found), found


def problems_of_cli(text: str, spec: str) -> list[tuple[str, str]]:
    with pytest.raises(PlanError) as exc:
        parse_plan(textwrap.dedent(text), thresholds=(spec,))
    return [(p.path, p.message) for p in exc.value.problems]
