import json
from pathlib import Path

import pytest

from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.plan.parse import parse_plan, plan_schema

GOOD = """
name: t
duration_s: 5
targets:
  - {url: "http://127.0.0.2:8080", weight: 3}
  - {url: "http://127.0.0.3:8080"}
workload:
  requests:
    - {name: index, path: /index.html, weight: 2}
    - {path: /a.css}
load: {model: closed, clients: 10}
"""


def test_good_plan_gets_defaults():
    plan = parse_plan(GOOD)
    assert [t.weight for t in plan.targets] == [3, 1]
    assert [r.name for r in plan.requests] == ["index", "/a.css"]
    assert plan.keep_alive and plan.interval_ms == 1000
    assert plan.load.clients == 10


def test_resolved_plan_round_trips_through_yaml():
    plan = parse_plan(GOOD)
    assert parse_plan(plan.to_yaml()) == plan


@pytest.mark.parametrize(
    "text, paths",
    [
        # three mistakes at once: all three are reported
        (
            """
duration_s: -1
targets: [{url: "http://127.0.0.1:1", weight: -2}]
workload: {requests: [{path: /}]}
load: {model: closed, clients: 0}
""",
            {"duration_s", "targets[0].weight", "load.clients"},
        ),
        (
            """
duration_s: 1
targets: [{url: "ftp://x"}, {url: "http://h:1/path"}]
workload: {requests: [{path: /}]}
load: {model: closed, clients: 1}
""",
            {"targets[0].url", "targets[1].url"},
        ),
        (
            """
duration_s: 1
targets: [{url: "http://h:1"}]
workload: {requests: [{path: nope, method: FETCH}]}
load: {model: closed}
bogus: 1
""",
            {"workload.requests[0].path", "workload.requests[0].method", ""},
        ),
    ],
)
def test_every_problem_is_reported_with_its_path(text, paths):
    with pytest.raises(PlanError) as info:
        parse_plan(text)
    assert paths <= {p.path for p in info.value.problems}


def test_meaning_problems_after_structure_is_right():
    with pytest.raises(PlanError) as info:
        parse_plan("""
duration_s: 1
targets: [{url: "http://h:1", weight: 0}]
workload: {requests: [{path: /, weight: 0}]}
load: {model: closed}
""")
    assert {p.path for p in info.value.problems} == {"targets", "workload", "load.clients"}


def test_not_yaml_is_one_clear_problem():
    with pytest.raises(PlanError) as info:
        parse_plan("targets: [unclosed")
    assert "not valid YAML" in str(info.value)


def test_manifest_becomes_requests_named_by_class(tmp_path: Path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "files": [
                    {"path": "/class0/a.html", "class": "class0", "weight": 35.0, "bytes": 100},
                    {"path": "/class1/b.html", "class": "class1", "weight": 50.5, "bytes": 5000},
                ]
            }
        )
    )
    plan = parse_plan(
        """
duration_s: 1
targets: [{url: "http://h:1"}]
workload: {manifest: manifest.json}
load: {model: closed, clients: 1}
""",
        base_dir=tmp_path,
        confined=False,
    )
    assert [(r.name, r.path, r.weight) for r in plan.requests] == [
        ("class0", "/class0/a.html", 70),
        ("class1", "/class1/b.html", 101),  # 35 : 50.5 exactly
    ]


def test_missing_manifest_is_a_problem(tmp_path: Path):
    with pytest.raises(PlanError) as info:
        parse_plan(
            """
duration_s: 1
targets: [{url: "http://h:1"}]
workload: {manifest: nope.json}
load: {model: closed, clients: 1}
""",
            base_dir=tmp_path,
            confined=False,
        )
    assert [p.path for p in info.value.problems] == ["workload.manifest"]


def test_published_schema_is_the_one_in_use():
    published = json.loads((Path(__file__).parents[3] / "docs" / "plan.schema.json").read_text())
    assert published == plan_schema()


MODELS = """
duration_s: 5
targets: [{url: "http://127.0.0.1:1"}]
workload:
  requests: [{name: page, path: /}, {name: image, path: /i.png}]
  {session}
load: {load}
{extra}
"""


def models_plan(load, session="", extra=""):
    return MODELS.replace("{load}", load).replace("{session}", session).replace("{extra}", extra)


@pytest.mark.parametrize(
    "load, expected",
    [
        ("{model: open, rate: 500, poisson: true}", "500/s"),
        (
            "{model: open, rate: 0, stages: [{duration_s: 60, target: 500}, {duration_s: 120, target: 500}]}",
            "0/s → 500 in 60 s → 500 in 120 s",
        ),
        ("{model: users, users: 100, spawn_rate: 20, think: {uniform_ms: [5000, 10000]}}", "100 users at 20/s"),
        ("{model: closed, clients: 8, think: {exponential_ms: 200}}", "8 clients"),
    ],
)
def test_every_load_model_parses_and_round_trips(load, expected):
    plan = parse_plan(models_plan(load))
    assert plan.load.describe() == expected
    assert parse_plan(plan.to_yaml()) == plan


def test_sessions_and_budgets():
    session = "session: {steps: [{request: page, think: {fixed_ms: 500}}, {request: image}], repeat: 3}"
    plan = parse_plan(models_plan("{model: users, users: 10, spawn_rate: 2}", session, "budget: {requests: 1000}"))
    assert [s.request for s in plan.session.steps] == ["page", "image"]
    assert plan.session.repeat == 3 and plan.max_requests == 1000
    # Open: the rate is of arriving users, each walking the session (Tsung's arrival phases).
    arrivals = parse_plan(models_plan("{model: open, rate: 500, poisson: true, max_connections: 20000}", session))
    assert arrivals.session == plan.session and arrivals.load.max_connections == 20000
    assert parse_plan(plan.to_yaml()) == plan


@pytest.mark.parametrize(
    "load, session, paths",
    [
        ("{model: open}", "", {"load.rate"}),
        ("{model: users, users: 5}", "", {"load.spawn_rate"}),
        ("{model: closed, clients: 5, rate: 9}", "", {"load.rate"}),
        ("{model: open, rate: 5, think: {fixed_ms: 1}}", "", {"load.think"}),
        ("{model: users, users: 5, spawn_rate: 1, stages: [{duration_s: 1, target: 2}]}", "", {"load.stages"}),
        ("{model: closed, clients: 0, stages: [{duration_s: 1, target: 0}]}", "", {"load.clients"}),
        ("{model: closed, clients: 1, think: {uniform_ms: [9, 2]}}", "", {"load.think.uniform_ms"}),
        (
            "{model: open, rate: 5}",
            "session: {steps: [{request: nope}]}",
            {"workload.session.steps[0].request"},
        ),
        ("{model: open, rate: 5}\ndriver: gatling", "session: {steps: [{request: page}]}", {"workload.session"}),
    ],
)
def test_load_mistakes_name_their_field(load, session, paths):
    with pytest.raises(PlanError) as info:
        parse_plan(models_plan(load, session))
    assert paths <= {p.path for p in info.value.problems}, info.value.problems


def test_a_plain_plan_warms_up_and_keeps_its_warm_up_through_yaml():
    plan = parse_plan(GOOD + "warmup_s: 2\n")
    assert plan.warmup_s == 2.0 and plan.sweep is None
    assert parse_plan(plan.to_yaml()) == plan
    assert parse_plan(GOOD).warmup_s == 0.0 and "warmup_s" not in parse_plan(GOOD).to_yaml()


@pytest.mark.parametrize(
    "extra, message",
    [
        ("warmup_s: 4.5\n", "a warm-up of 4.5 s leaves less than one interval of 1 s of the 5 s of load to measure"),
        ("warmup_s: -1\n", "-1 is less than the minimum of 0"),
        ("warmup_s: 1\ninterval_ms: 5000\n", "a warm-up of 1 s leaves less than one interval of 5 s"),
    ],
)
def test_a_warm_up_must_leave_load_to_measure(extra, message):
    with pytest.raises(PlanError) as info:
        parse_plan(GOOD + extra)
    [problem] = info.value.problems
    assert problem.path == "warmup_s" and message in problem.message


def test_a_sweep_takes_its_warm_up_per_step():
    sweep = GOOD.replace("duration_s: 5\n", "").replace("clients: 10", "clients: 1")
    with pytest.raises(PlanError) as info:
        parse_plan(
            sweep.replace("load: {model: closed, clients: 1}", "load: {model: closed}")
            + "sweep: {steps: [1, 2], step_s: 5}\nwarmup_s: 1\n"
        )
    assert [(p.path, p.message) for p in info.value.problems] == [
        ("warmup_s", "a sweep warms each step up: give sweep.warmup_s")
    ]


TWO_WEBS = """
duration_s: 5
targets: [{name: web1, url: "http://127.0.0.2:8080"}, {url: "http://127.0.0.3:8080", weight: 2}]
load: {model: closed, clients: 2}
workload: {requests: [{path: /}]}
"""


def test_a_named_target_takes_its_url_from_the_command_line_and_keeps_it_when_sent():
    plan = parse_plan(TWO_WEBS, target_urls={"web1": "http://10.0.0.11/"})
    assert [(t.name, t.url, t.weight) for t in plan.targets] == [
        ("web1", "http://10.0.0.11", 1),
        ("", "http://127.0.0.3:8080", 2),
    ]
    assert parse_plan(plan.to_yaml()) == plan


@pytest.mark.parametrize(
    "urls, where, says",
    [
        ({"web2": "http://10.0.0.12"}, "--target", "no target is named 'web2' (names: web1)"),
        ({"web1": "gopher://10.0.0.11"}, "targets[0].url", "must start with http:// or https://"),
    ],
)
def test_a_bad_target_override_names_the_problem(urls, where, says):
    with pytest.raises(PlanError) as info:
        parse_plan(TWO_WEBS, target_urls=urls)
    assert [(p.path, p.message) for p in info.value.problems if says in p.message] == [
        (where, info.value.problems[0].message)
    ]


def test_target_names_are_unique():
    with pytest.raises(PlanError, match="names targets\\[0\\] too"):
        parse_plan(TWO_WEBS.replace('{url: "http://127.0.0.3:8080"', '{name: web1, url: "http://127.0.0.3:8080"'))
