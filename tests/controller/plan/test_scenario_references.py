"""What names a scenario in a plan (issue 31 S2): the sweep's, the stop conditions' and the
thresholds' `scenario` read, kept and written back; a step's plan levels only the swept
scenario and cuts every scenario's targets."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.model.load import Load, LoadModel
from loadfleet.controller.plan import yamlsafe
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.plan.scenarios import ScenarioTarget
from loadfleet.controller.plan.steps import expand, step_plan, swept_scenario
from loadfleet.controller.plan.thresholds import Threshold, threshold_from_doc

SWEPT = """
name: search-sweep
targets:
  - {name: web, url: "http://127.0.0.70:18801"}
  - {name: api, url: "http://127.0.0.71:18801"}
scenarios:
  - {name: background, targets: [web], workload: {requests: [{name: logo, path: /logo.png}]},
     load: {model: open, rate: 200}}
  - {name: search, targets: [web, api], workload: {requests: [{name: q, path: /search.php?q=a}]},
     load: {model: closed}}
sweep: {scenario: search, steps: [10, 20, 40], step_s: 60, warmup_s: 10, servers: [1, 2]}
stop:
  error_pct: {scenario: search, above: 5, for_s: 10}
  latency: {scenario: background, percentile: 99, above_ms: 2000, for_s: 10}
thresholds:
  - {metric: latency, stat: p99, scenario: search, below_ms: 300, over: step}
  - {metric: error_pct, scenario: background, request: logo, below: 1, over: run}
  - {metric: rps, target: web, above: 1, over: step}
"""


def doc_of(text: str = SWEPT) -> dict[str, Any]:
    doc = yamlsafe.load(textwrap.dedent(text))
    assert isinstance(doc, dict)
    return doc


def parsed(doc: dict[str, Any] | str = SWEPT, **kw: Any):
    text = doc if isinstance(doc, str) else yamlsafe.dump(doc)
    return parse_plan(textwrap.dedent(text), **kw)


def problems_of(doc: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(PlanError) as exc:
        parsed(doc)
    return [(p.path, p.message) for p in exc.value.problems]


def test_references_are_read_and_kept():
    plan = parsed()
    assert plan.sweep is not None and plan.sweep.scenario == "search"
    assert plan.stop is not None and plan.stop.error_pct is not None and plan.stop.latency is not None
    assert (plan.stop.error_pct.scenario, plan.stop.latency.scenario) == ("search", "background")
    assert [t.scenario for t in plan.thresholds] == ["search", "background", ""]
    assert [t.scope for t in plan.thresholds] == ["scenario search", "scenario background, request logo", "target web"]
    assert plan.duration_s == 3 * 2 * 60


def test_a_scenario_plan_writes_its_references_and_reads_back_equal():
    plan = parsed()
    again = parse_plan(plan.to_yaml())
    assert again == plan
    written = yamlsafe.load(plan.to_yaml())
    assert isinstance(written, dict) and written["sweep"]["scenario"] == "search"
    search = next(s for s in written["scenarios"] if s["name"] == "search")
    assert "clients" not in search["load"]  # the steps set it
    background = next(s for s in written["scenarios"] if s["name"] == "background")
    assert background["load"]["rate"] == 200


def test_the_shorthand_keeps_its_scenario():
    plan = parsed(thresholds=("scenario=search:p99_ms<250@step",))
    added = plan.thresholds[-1]
    assert (added.scenario, added.scope, added.limit) == ("search", "scenario search", 250)


@pytest.mark.parametrize(
    ("doc", "scope"),
    [
        ({"metric": "ok", "above": 1}, "cluster"),
        ({"metric": "ok", "above": 1, "request": "pay"}, "request pay"),
        ({"metric": "ok", "above": 1, "scenario": "checkout"}, "scenario checkout"),
        ({"metric": "ok", "above": 1, "scenario": "checkout", "target": "api"}, "scenario checkout, target api"),
    ],
)
def test_a_thresholds_scope_names_its_scenario(doc: dict[str, Any], scope: str):
    threshold = threshold_from_doc(doc)
    assert isinstance(threshold, Threshold) and threshold.scope == scope
    assert threshold.scenario == doc.get("scenario", "")


def test_a_step_levels_the_swept_scenario_only_and_cuts_every_scenarios_targets():
    plan = parsed()
    specs = expand(plan)
    assert {s.scenario for s in specs} == {"search"} and swept_scenario(plan) == "search"
    first = step_plan(plan, specs[0])  # k1-s1: 10 clients, the first target only
    background, search = first.scenarios
    assert search.load == Load(LoadModel.CLOSED, clients=10) and background.load == plan.scenarios[0].load
    assert (search.targets, background.targets) == ((ScenarioTarget("web", 1),), (ScenarioTarget("web", 1),))
    assert [t.name for t in first.targets] == ["web"] and (first.sweep, first.stop, first.duration_s) == (
        None,
        None,
        60,
    )
    last = step_plan(plan, specs[-1])  # k2-s3: 40 clients on both targets
    assert last.scenarios[1].load.clients == 40 and len(last.scenarios[1].targets) == 2


def test_a_one_scenario_plan_sweeps_its_scenario_without_naming_it():
    doc = doc_of()
    doc["scenarios"] = doc["scenarios"][1:]
    del doc["sweep"]["scenario"], doc["stop"]["latency"], doc["thresholds"][1]
    plan = parsed(doc)
    assert plan.sweep is not None and plan.sweep.scenario == "" and swept_scenario(plan) == "search"
    assert step_plan(plan, expand(plan)[2]).scenarios[0].load.clients == 40
    assert parse_plan(plan.to_yaml()) == plan


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (  # the background is not swept: it needs its own rate
            lambda d: d["scenarios"][0]["load"].pop("rate"),
            ("scenarios[0].load.rate", "needs 'rate'"),
        ),
        (  # the swept one gets its level from the steps
            lambda d: d["scenarios"][1]["load"].update(clients=3),
            ("scenarios[1].load.clients", "sweep.steps sets the clients"),
        ),
        (
            lambda d: d["scenarios"][0].update(targets=["api"]),
            ("sweep.servers[0]", "scenario background has no target among the first 1 target(s) of this step"),
        ),
        (
            lambda d: d["sweep"].update(steps=[1.5]),
            ("sweep.steps[0]", "1.5 is not a whole number of clients"),
        ),
        (
            lambda d: d["thresholds"][0].update(request="nope"),
            ("thresholds[0].request", "scenario search has no request 'nope' (q)"),
        ),
        (
            lambda d: d["thresholds"][2].pop("over"),
            ("thresholds[2].over", "a plan with a sweep says `over`"),
        ),
    ],
)
def test_a_sweep_over_a_scenario_is_checked_with_paths(change: Any, expected: tuple[str, str]):
    doc = doc_of()
    change(doc)
    found = problems_of(doc)
    assert any(path == expected[0] and expected[1] in message for path, message in found), found
    assert len([p for p, _ in found if p == expected[0]]) == 1, found  # said once
