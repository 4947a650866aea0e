"""A plan's journey in the JobSpec an agent receives (rpc/journeyconvert.py, jobconvert._job_spec):
every check, extraction, variable slot, `once` step and jar cap as the plan says it."""

from pathlib import Path

import yaml

from loadfleet.controller.fleet.jobs import JobAssignment
from loadfleet.controller.fleet.scheduler import split_over_engines
from loadfleet.controller.plan.model import Plan
from loadfleet.controller.plan.parse import load_plan, parse_plan
from loadfleet.controller.rpc.jobconvert import assignment_to_proto
from loadfleet.v1 import job_pb2

PLANS = Path(__file__).parents[3] / "plans"


def spec_of(plan, agents=(("a", 1),), agent=0) -> job_pb2.JobSpec:
    shares = split_over_engines(plan.load, plan.max_requests, list(agents))
    assignment = JobAssignment(job_id="r/s", plan=plan, engines=shares[agent].engines, start_at_ms=2**41)
    return assignment_to_proto(assignment).assignment.spec


def plan_of(requests, **workload) -> Plan:
    doc = {
        "duration_s": 5,
        "targets": [{"url": "http://127.0.0.2:8080"}],
        "workload": {"requests": requests, **workload},
        "load": {"model": "closed", "clients": 4},
    }
    return parse_plan(yaml.safe_dump(doc))


def test_the_login_journey_reaches_the_spec():
    plan = load_plan(PLANS / "journey-login.yaml")
    spec = spec_of(plan)
    assert list(spec.variables) == ["csrf"]
    page, login, account, cart = spec.requests
    [extract] = page.extracts
    assert extract == job_pb2.Extract(var=0, form_field="csrf", on_missing=job_pb2.ON_FAIL_RESTART, name="extract csrf")
    assert page.checks[0] == job_pb2.Check(
        name="login form", status=["200"], body_contains='name="csrf"', on_fail=job_pb2.ON_FAIL_CONTINUE
    )
    assert login.body == b"user=user${user}&password=pw${user}&csrf=${csrf:url}", "templates stay text"
    assert login.checks[0].header == job_pb2.HeaderCondition(name="Location", equals="/account.php")
    assert login.checks[0].on_fail == job_pb2.ON_FAIL_RESTART
    assert [c.name for c in account.checks] == ["account page", "account fast"]
    assert account.checks[1].latency_below_ms == 200 and not account.checks[1].status
    assert list(cart.checks[0].status) == ["2xx", "3xx"]
    assert [s.request for s in spec.session.once] == [0, 1]
    assert spec.session.once[0].think_after.fixed_ms == 200
    assert [s.request for s in spec.session.steps] == [2, 3]
    assert spec.cookies == job_pb2.Cookies(max_cookies=16, max_bytes=8192)
    assert spec.max_body_bytes == 0, "the engine's default"


def test_variables_are_slots_in_first_extraction_order():
    plan = plan_of(
        [
            {"name": "one", "path": "/1", "extract": [{"var": "b", "status": True}, {"var": "a", "header": "X-A"}]},
            {"name": "two", "path": "/2/${a}", "extract": [{"var": "a", "cookie": "A"}, {"var": "c", "regex": "(x)"}]},
        ]
    )
    spec = spec_of(plan)
    assert list(spec.variables) == ["b", "a", "c"]
    assert [(e.var, e.WhichOneof("source")) for r in spec.requests for e in r.extracts] == [
        (0, "status"),
        (1, "header"),
        (1, "cookie"),
        (2, "regex"),
    ]


def test_every_condition_and_source_keeps_its_kind():
    plan = plan_of(
        [
            {
                "name": "api",
                "path": "/api",
                "check": [
                    {"name": "no debug", "header": {"name": "X-Debug", "absent": True}},
                    {"name": "typed", "header": {"name": "Content-Type", "regex": "^application/json"}},
                    {"name": "has id", "json_path": {"path": "$.id", "exists": True}, "on_fail": "stop"},
                    {"name": "ok", "json_path": {"path": "$.ok", "equals": ""}, "body_lacks": "error"},
                ],
                "extract": [
                    {"var": "whole", "json_pointer": ""},
                    {"var": "second", "json_path": "$.items[*].id", "occurrence": 1, "default": "none"},
                ],
            }
        ]
    )
    [request] = spec_of(plan).requests
    absent, typed, has_id, ok = request.checks
    assert absent.header.WhichOneof("test") == "absent" and absent.header.absent
    assert typed.header.WhichOneof("test") == "regex" and typed.header.regex == "^application/json"
    assert has_id.json_path.WhichOneof("test") == "exists" and has_id.on_fail == job_pb2.ON_FAIL_STOP
    assert ok.json_path.WhichOneof("test") == "equals" and ok.json_path.equals == "" and ok.body_lacks == "error"
    whole, second = request.extracts
    assert whole.WhichOneof("source") == "json_pointer" and whole.json_pointer == "", "'' is the whole document"
    assert (second.json_path, second.occurrence, second.default_value) == ("$.items[*].id", 1, "none")


def test_a_plan_without_a_journey_sends_none():
    spec = spec_of(plan_of([{"path": "/"}]))
    assert not spec.variables and not spec.HasField("cookies")
    assert not spec.requests[0].extracts and not spec.requests[0].checks


def test_a_jar_turned_off_is_said():
    assert spec_of(plan_of([{"path": "/"}], cookies=False)).cookies == job_pb2.Cookies(off=True)


def test_each_agent_gets_the_fleet_wide_index_of_its_first_user():
    plan = plan_of([{"path": "/"}])  # 4 clients
    agents = (("a", 2), ("b", 1), ("c", 1))  # engines of 1 client each
    assert [spec_of(plan, agents, agent=i).first_user for i in range(3)] == [0, 2, 3]


def test_redirects_reach_the_spec_per_request():
    spec = spec_of(plan_of([{"path": "/a", "redirects": 5}, {"path": "/b"}]))
    assert [r.max_redirects for r in spec.requests] == [5, 0]


def test_the_assignment_s_agent_index_is_the_spec_s():
    plan = plan_of([{"path": "/${agent}"}])
    shares = split_over_engines(plan.load, plan.max_requests, [("a", 1), ("b", 1)])
    specs = [
        assignment_to_proto(
            JobAssignment(job_id="r/s", plan=plan, engines=s.engines, start_at_ms=2**41, agent_index=i)
        ).assignment.spec
        for i, s in enumerate(shares)
    ]
    assert [s.agent_index for s in specs] == [0, 1]
