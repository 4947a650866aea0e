"""What the Gatling driver refuses in a plan with scenarios (plan/course.py driver_problems),
each with its path; a plan without scenarios keeps today's refusals."""

from __future__ import annotations

import textwrap

import pytest

from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.plan.parse import parse_plan

ENGINE = "use driver: engine"

TWO = """
name: two
duration_s: 30
driver: gatling
targets: [{name: web, url: "http://127.0.0.2:8080"}]
scenarios:
  - name: browse
    workload: {requests: [{name: home, path: /}]}
    load: {model: closed, clients: 4}
  - name: buy
    start_after_s: 10
    workload: {requests: [{name: pay, method: POST, path: /pay}]}
    load: {model: open, rate: 5}
"""


def problems_of(text: str) -> list[tuple[str, str]]:
    with pytest.raises(PlanError) as exc:
        parse_plan(textwrap.dedent(text))
    return [(p.path, p.message) for p in exc.value.problems]


def test_a_gatling_plan_with_scenarios_parses():
    assert [s.name for s in parse_plan(textwrap.dedent(TWO)).scenarios] == ["browse", "buy"]


@pytest.mark.parametrize(
    ("old", "new", "path", "words"),
    [
        (
            "load: {model: open, rate: 5}",
            "load: {model: open, rate: 0, stages: [{duration_s: 5, target: 10}]}",
            "scenarios[1].load.stages",
            "does not run stages",
        ),
        (
            "load: {model: open, rate: 5}",
            "load: {model: open, rate: 5}\n    budget: {requests: 100}",
            "scenarios[1].budget",
            "does not run request budgets",
        ),
        (
            "workload: {requests: [{name: pay, method: POST, path: /pay}]}",
            "workload: {requests: [{name: pay, method: POST, path: /pay}], session: {steps: [{request: pay}]}}",
            "scenarios[1].workload.session",
            "open model",
        ),
        (
            "duration_s: 30\n",
            "sweep: {steps: [1, 2], step_s: 10}\n",
            "sweep",
            "does not run sweeps",
        ),
        (
            "driver: gatling\n",
            "driver: gatling\ngatling: {project: /srv/perf, simulation: com.example.Home}\n",
            "gatling.project",
            "scenarios need loadfleet's JobSimulation",
        ),
    ],
)
def test_each_refusal_names_its_scenario_field(old, new, path, words):
    text = TWO.replace(old, new, 1)
    assert text != TWO
    found = [message for where, message in problems_of(text) if where == path]
    assert found and words in found[0], problems_of(text)


def test_the_engine_driver_refuses_none_of_those():
    text = TWO.replace("driver: gatling\n", "").replace(
        "load: {model: open, rate: 5}", "load: {model: open, rate: 5}\n    budget: {requests: 100}"
    )
    assert parse_plan(textwrap.dedent(text)).scenarios[1].max_requests == 100


PLAIN = """
name: plain
duration_s: 30
driver: gatling
targets: [{url: "http://127.0.0.2:8080"}]
workload: {requests: [{path: /}]}
load: {model: closed, clients: 0, stages: [{duration_s: 5, target: 3}]}
budget: {requests: 100}
"""


def test_a_plain_gatling_plan_keeps_its_refusals_and_their_paths():
    refused = [(path, message) for path, message in problems_of(PLAIN) if ENGINE in message]
    assert [path for path, _ in refused] == ["load.stages", "budget"]
