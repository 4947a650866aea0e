"""Journeys in a plan (docs/plans.md, "Journeys"): checks, extractions, templates, `once`
and the cookie jar read into values, written back equal, and every mistake named by its path."""

from pathlib import Path

import pytest
import yaml

from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.plan.journeys import (
    Check,
    Cookies,
    Extract,
    ExtractSource,
    HeaderCondition,
    HeaderTest,
    JsonCondition,
    OnFail,
)
from loadfleet.controller.plan.parse import load_plan, parse_plan

PLANS = Path(__file__).parents[3] / "plans"

LOGIN = """
name: login
duration_s: 10
targets: [{name: app, url: "http://127.0.0.70:18801"}]
workload:
  requests:
    - name: login-page
      path: /login.php
      weight: 0
      check: [{name: login form, status: [200], body_contains: 'name="csrf"'}]
      extract: [{var: csrf, form_field: csrf, on_missing: restart}]
    - name: login
      method: POST
      path: /login.php
      weight: 0
      headers: {Content-Type: application/x-www-form-urlencoded}
      body: "user=user${user}&password=pw${user}&csrf=${csrf:url}"
      check: [{name: logged in, status: [302], header: {name: Location, equals: /account.php}}]
      extract: [{var: sid, cookie: PHPSESSID}]
    - name: account
      path: /account.php?s=${sid}
      check:
        - {name: account page, status: [200, "2xx", "200-299"], body_contains: "Welcome, user${user}", on_fail: restart}
        - {name: account fast, latency_below_ms: 200}
        - {name: json ok, json_path: {path: $.ok, equals: "true"}, header: {name: X-Debug, absent: true}}
      extract:
        - {var: items, regex: 'data-items="(\\d+)"', occurrence: 1, default: "0", on_missing: stop}
        - {var: code, status: true}
  session:
    once:
      - {request: login-page, think: {fixed_ms: 500}}
      - {request: login}
    steps:
      - {request: account}
load: {model: closed, clients: 20}
"""


def login(**replace: object) -> dict:
    doc = yaml.safe_load(LOGIN)
    for dotted, value in replace.items():
        *parents, last = dotted.split("__")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if value is None:
            del node[int(last) if isinstance(node, list) else last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return doc


def problems(doc: dict) -> list[tuple[str, str]]:
    with pytest.raises(PlanError) as caught:
        parse_plan(yaml.safe_dump(doc))
    return [(p.path, p.message) for p in caught.value.problems]


def test_the_login_journey_reads_into_values():
    plan = parse_plan(LOGIN)
    page, form, account = plan.requests
    assert page.checks == (Check("login form", status=("200",), body_contains='name="csrf"'),)
    assert page.extracts == (Extract("csrf", ExtractSource.FORM_FIELD, "csrf", on_missing=OnFail.RESTART),)
    assert form.checks[0].header == HeaderCondition("Location", HeaderTest.EQUALS, "/account.php")
    assert account.checks[0].status == ("200", "2xx", "200-299") and account.checks[0].on_fail is OnFail.RESTART
    assert account.checks[2].json_path == JsonCondition("$.ok", "true")
    assert account.checks[2].header == HeaderCondition("X-Debug", HeaderTest.ABSENT)
    assert account.extracts == (
        Extract("items", ExtractSource.REGEX, 'data-items="(\\d+)"', 1, OnFail.STOP, "0"),
        Extract("code", ExtractSource.STATUS),
    )
    assert [s.request for s in plan.session.once] == ["login-page", "login"]
    assert plan.cookies == Cookies()


def test_the_login_journey_round_trips_through_yaml():
    plan = parse_plan(LOGIN)
    assert parse_plan(plan.to_yaml()) == plan
    jar = parse_plan(yaml.safe_dump(login(workload__cookies={"max_cookies": 64, "max_bytes": 4096})))
    assert jar.cookies == Cookies(max_cookies=64, max_bytes=4096)
    assert parse_plan(jar.to_yaml()) == jar
    off = parse_plan(yaml.safe_dump(login(workload__cookies=False)))
    assert off.cookies == Cookies(enabled=False) and parse_plan(off.to_yaml()) == off


def test_the_shipped_plan_validates():
    plan = load_plan(PLANS / "journey-login.yaml", target_urls={"app": "http://127.0.0.9:8080"})
    assert [s.request for s in plan.session.once] == ["login-page", "login"]
    assert {t.check for t in plan.thresholds if t.check} == {"logged in", "extract csrf"}


@pytest.mark.parametrize("method", ["PATCH", "OPTIONS"])
def test_new_methods(method):
    assert parse_plan(yaml.safe_dump(login(workload__requests__2__method=method))).requests[2].method == method


LOGIN_PATH = "workload.requests[1]"
ACCOUNT = "workload.requests[2]"


@pytest.mark.parametrize(
    "replace, path, words",
    [
        # templates
        ({"workload__requests__1__body": "csrf=${crsf}"}, f"{LOGIN_PATH}.body", "unknown variable 'crsf' at byte 5"),
        ({"workload__requests__1__body": "csrf=${crsf}"}, f"{LOGIN_PATH}.body", "variables: code, csrf, items, sid"),
        ({"workload__requests__1__body": "price: ${total}"}, f"{LOGIN_PATH}.body", "is written `$${`"),
        ({"workload__requests__1__path": "/x/${csrf"}, f"{LOGIN_PATH}.path", "never closed"),
        (
            {"workload__requests__1__headers": {"X-T": "${csrf:b64}"}},
            f"{LOGIN_PATH}.headers.X-T",
            "unknown filter ':b64'",
        ),
        ({"workload__requests__1__body": "${accounts.username}"}, f"{LOGIN_PATH}.body", "unknown data set"),
        ({"workload__requests__1__body": "${random(9,1)}"}, f"{LOGIN_PATH}.body", "random takes two whole numbers"),
        (
            {"workload__requests__2__check__0__body_contains": "${nope}"},
            f"{ACCOUNT}.check[0].body_contains",
            "unknown variable 'nope'",
        ),
        # never filled: read before any request of the session extracts it
        (
            {"workload__requests__1__body": "x=${items}"},
            f"{LOGIN_PATH}.body",
            "${items} is a template that can never be filled: the session reaches it at workload.session.once[1]",
        ),
        (
            {"workload__session__once": [{"request": "login"}, {"request": "login-page"}]},
            f"{LOGIN_PATH}.body",
            "${csrf} is a template that can never be filled",
        ),
        (
            {"workload__requests__2__path": "/account.php?i=${items}"},
            f"{ACCOUNT}.path",
            "never be filled: the session reaches it at workload.session.steps[0]",
        ),
        # extractions
        ({"workload__requests__0__extract__0__var": "user"}, "workload.requests[0].extract[0].var", "is a built-in"),
        ({"workload__requests__0__extract__0__var": "1st"}, "workload.requests[0].extract[0].var", "a letter or _"),
        (
            {"workload__requests__0__extract__0": {"var": "csrf"}},
            "workload.requests[0].extract[0]",
            "give exactly one of status, header, cookie, regex, json_pointer, json_path, form_field (none given)",
        ),
        (
            {"workload__requests__0__extract__0": {"var": "csrf", "header": "X-T", "cookie": "c"}},
            "workload.requests[0].extract[0]",
            "(not header and cookie)",
        ),
        (
            {"workload__requests__0__extract__0": {"var": "csrf", "header": "X-T", "occurrence": 2}},
            "workload.requests[0].extract[0].occurrence",
            "only regex and json_path find an occurrence",
        ),
        (
            {"workload__requests__0__extract__0": {"var": "csrf", "json_pointer": "a/b"}},
            "workload.requests[0].extract[0].json_pointer",
            "empty or starts with /",
        ),
        (
            {"workload__requests__0__extract__0": {"var": "csrf", "json_path": "items[0]"}},
            "workload.requests[0].extract[0].json_path",
            "a JSONPath starts with $",
        ),
        (
            {"workload__requests__0__extract__0": {"var": "csrf", "form_field": "csrf", "on_missing": "fail"}},
            "workload.requests[0].extract[0].on_missing",
            "'continue', 'restart', 'stop'",
        ),
        (
            {"workload__requests__2__extract__1": {"var": "items", "status": True}},
            f"{ACCOUNT}.extract[1].var",
            "'items' is extracted by extract[0] too",
        ),
        # regexes the engine cannot run
        (
            {"workload__requests__2__extract__0__regex": "(?=x)(\\d+)"},
            f"{ACCOUNT}.extract[0].regex",
            "'(?=' at 0 is look-ahead",
        ),
        (
            {"workload__requests__2__check__0__body_regex": "a(?<!b)c"},
            f"{ACCOUNT}.check[0].body_regex",
            "look-behind",
        ),
        ({"workload__requests__2__check__0__body_regex": "(a)\\1"}, f"{ACCOUNT}.check[0].body_regex", "backreference"),
        (
            {"workload__requests__2__check__0__header": {"name": "X", "regex": "(?P<a>x)(?P=a)"}},
            f"{ACCOUNT}.check[0].header.regex",
            "backreference",
        ),
        # checks
        (
            {"workload__requests__2__check__1__name": "login form"},
            f"{ACCOUNT}.check[1].name",
            "'login form' names workload.requests[0].check[0] too",
        ),
        (
            {"workload__requests__2__check__1__name": "extract it"},
            f"{ACCOUNT}.check[1].name",
            "names an extraction's counts",
        ),
        ({"workload__requests__2__check__1": {"name": "empty"}}, f"{ACCOUNT}.check[1]", "at least one condition"),
        ({"workload__requests__2__check__0__status": ["2xy"]}, f"{ACCOUNT}.check[0].status[0]", "a class like '2xx'"),
        ({"workload__requests__2__check__0__status": ["300-200"]}, f"{ACCOUNT}.check[0].status[0]", "range"),
        ({"workload__requests__2__check__0__status": ["600"]}, f"{ACCOUNT}.check[0].status[0]", "100-599"),
        ({"workload__requests__2__check__0__status": [99]}, f"{ACCOUNT}.check[0].status[0]", "less than the minimum"),
        ({"workload__requests__2__check__0__on_fail": "fail"}, f"{ACCOUNT}.check[0].on_fail", "'continue'"),
        (
            {"workload__requests__2__check__2__json_path": {"path": "ok", "exists": True}},
            f"{ACCOUNT}.check[2].json_path.path",
            "a JSONPath starts with $",
        ),
        (
            {"workload__requests__2__check__2__header": {"name": "X", "equals": "a", "absent": True}},
            f"{ACCOUNT}.check[2].header",
            "more than 2 entries",
        ),
        # the session
        ({"workload__session__once": [{"request": "logon"}]}, "workload.session.once[0].request", "no request"),
        # the jar
        ({"workload__cookies": {"max_cookies": 0}}, "workload.cookies.max_cookies", "less than the minimum of 1"),
        ({"workload__cookies": {"max_bytes": 4095}}, "workload.cookies.max_bytes", "less than the minimum of 4096"),
        ({"workload__cookies": {"max_cookies": 65}}, "workload.cookies.max_cookies", "above the maximum of 64"),
        ({"workload__cookies": {"max_bytes": 65537}}, "workload.cookies.max_bytes", "above the maximum of 65,536"),
    ],
)
def test_journey_problem_is_named_by_its_path(replace, path, words):
    found = problems(login(**replace))
    assert any(p == path and words in m for p, m in found), found


@pytest.mark.parametrize("regex", ["\\(?=", "[(?=]x", "[]()?=]", "(?:a|b)(?<name>x)", "\\\\1"])
def test_regexes_the_engine_runs_are_accepted(regex):
    """An escaped paren, a paren in a class, a named group and an escaped backslash are no
    look-around or backreference."""
    assert parse_plan(yaml.safe_dump(login(workload__requests__2__check__0__body_regex=regex)))


def test_open_model_without_a_session_has_no_users():
    doc = login(load={"model": "open", "rate": 10}, workload__cookies={"max_cookies": 4})
    del doc["workload"]["session"]
    found = dict(problems(doc))
    assert "no cookie jar" in found["workload.cookies"]
    assert "to keep a value" in found["workload.requests[0].extract"]
    assert "to restart: use continue" in found[f"{ACCOUNT}.check[0].on_fail"]
    assert "templates read built-ins only, not csrf" in found[f"{LOGIN_PATH}.body"]


def test_open_model_without_a_session_takes_checks_and_builtins():
    doc = {
        "duration_s": 5,
        "targets": [{"url": "http://127.0.0.2:8080"}],
        "workload": {
            "requests": [
                {"path": "/item/${random(1,9)}?u=${uuid}", "check": [{"name": "found", "status": [200, 404]}]}
            ],
            "cookies": False,
        },
        "load": {"model": "open", "rate": 10},
    }
    assert parse_plan(yaml.safe_dump(doc)).requests[0].checks[0].status == ("200", "404")


def test_gatling_runs_the_login_journey_as_the_engine_does():
    plan = parse_plan(yaml.safe_dump(login(driver="gatling")))
    assert [len(r.checks) for r in plan.requests] == [1, 1, 3]
    assert plan.session is not None and len(plan.session.once) == 2


@pytest.mark.parametrize(
    "replace, path, words",
    [
        (
            {"workload__requests__2__check__2__json_path__path": "$.items[?(@.n > 1)]"},
            f"{ACCOUNT}.check[2].json_path.path",
            "Gatling's JSONPath reads filters",
        ),
        (
            {"workload__requests__2__extract__0": {"var": "items", "json_path": "$..[?@.n]"}},
            f"{ACCOUNT}.extract[0].json_path",
            "Gatling's JSONPath reads filters",
        ),
        (
            {"workload__requests__2__extract__0__regex": "items=(?P<n>\\d+)"},
            f"{ACCOUNT}.extract[0].regex",
            "write (?<name>...)",
        ),
        (
            {"workload__requests__2__check__0__body_regex": "[[:alpha:]]+"},
            f"{ACCOUNT}.check[0].body_regex",
            "a POSIX class",
        ),
    ],
)
def test_gatling_refuses_what_java_or_its_jsonpath_read_otherwise(replace, path, words):
    found = problems(login(driver="gatling", **replace))
    assert [(p, "use `driver: engine`" in m and words in m) for p, m in found] == [(path, True)]
    # The engine driver takes the same plan.
    parse_plan(yaml.safe_dump(login(**replace)))


def test_gatling_takes_plain_requests_dollars_and_escaped_templates():
    doc = {
        "driver": "gatling",
        "duration_s": 5,
        "targets": [{"url": "http://127.0.0.2:8080"}],
        "workload": {"requests": [{"path": "/a", "method": "POST", "body": "cost $5 and $$"}]},
        "load": {"model": "closed", "clients": 1},
    }
    assert parse_plan(yaml.safe_dump(doc)).requests[0].body == "cost $5 and $$"
    doc["workload"]["requests"][0]["body"] = "literal $${x}"
    assert parse_plan(yaml.safe_dump(doc)).requests[0].body == "literal $${x}"


def test_gatling_takes_a_jar_turned_off_emptied_before_each_request():
    doc = {
        "driver": "gatling",
        "duration_s": 5,
        "targets": [{"url": "http://127.0.0.2:8080"}],
        "workload": {"requests": [{"path": "/a"}], "cookies": False},
        "load": {"model": "closed", "clients": 1},
    }
    assert parse_plan(yaml.safe_dump(doc)).cookies.enabled is False


@pytest.mark.parametrize(
    "check, accepted",
    [("logged in", True), ("extract csrf", True), ("extract sid", True), ("logged out", False), ("csrf", False)],
)
def test_check_pass_pct_names_a_check_or_an_extraction(check, accepted):
    doc = login(thresholds=[{"metric": "check_pass_pct", "check": check, "above": 99}])
    if accepted:
        assert parse_plan(yaml.safe_dump(doc)).thresholds[0].check == check
        return
    [(path, message)] = problems(doc)
    assert path == "thresholds[0].check" and f"no check is named {check!r}" in message
    assert "extract csrf" in message and "logged in" in message


# ---- bounds: each at its limit and one past it ---------------------------------------


def _many_checks(n: int) -> dict:
    return login(workload__requests__2__check=[{"name": f"c{i}", "latency_below_ms": 100} for i in range(n)])


def test_at_most_16_checks_per_request():
    assert len(parse_plan(yaml.safe_dump(_many_checks(16))).requests[2].checks) == 16
    assert (f"{ACCOUNT}.check", "more than 16 entries") in problems(_many_checks(17))


def test_at_most_16_extractions_per_request():
    at_limit = [{"var": f"v{i}", "status": True} for i in range(16)]
    assert len(parse_plan(yaml.safe_dump(login(workload__requests__2__extract=at_limit))).requests[2].extracts) == 16
    over = [*at_limit, {"var": "v16", "status": True}]
    assert (f"{ACCOUNT}.extract", "more than 16 entries") in problems(login(workload__requests__2__extract=over))


def test_a_check_name_is_at_most_64_bytes():
    assert parse_plan(yaml.safe_dump(login(workload__requests__2__check__1__name="é" * 32)))
    found = problems(login(workload__requests__2__check__1__name="é" * 32 + "x"))
    assert (f"{ACCOUNT}.check[1].name", "longer than 64 bytes") in found


def test_a_regex_is_at_most_1024_bytes():
    assert parse_plan(yaml.safe_dump(login(workload__requests__2__check__0__body_regex="a" * 1024)))
    found = problems(login(workload__requests__2__check__0__body_regex="é" * 513))
    assert any(p == f"{ACCOUNT}.check[0].body_regex" and "1026 bytes, over the 1024" in m for p, m in found), found


def test_at_most_64_variables():
    def extracting(n: int) -> dict:
        names = [f"v{i}" for i in range(n)]
        requests = [
            {"name": f"r{i}", "path": "/", "extract": [{"var": v, "status": True} for v in names[i : i + 16]]}
            for i in range(0, n, 16)
        ]
        return login(workload={"requests": requests})

    assert parse_plan(yaml.safe_dump(extracting(64)))
    assert ("workload.requests", "65 variables: a job holds at most 64") in problems(extracting(65))


def test_an_occurrence_is_at_most_1000():
    at_limit = login(workload__requests__2__extract__0__occurrence=1000)
    assert parse_plan(yaml.safe_dump(at_limit)).requests[2].extracts[0].occurrence == 1000
    found = problems(login(workload__requests__2__extract__0__occurrence=1001))
    assert (f"{ACCOUNT}.extract[0].occurrence", "1001 is above the maximum of 1,000") in found


def test_a_default_is_at_most_1024_bytes():
    assert parse_plan(yaml.safe_dump(login(workload__requests__2__extract__0__default="x" * 1024)))
    found = problems(login(workload__requests__2__extract__0__default="é" * 513))
    assert (f"{ACCOUNT}.extract[0].default", "over the 1024 bytes a variable may hold") in found


def test_a_static_body_keeps_its_size_bound_not_the_templates():
    """A body without `${` is sent as written: its bound stays the schema's 1 MiB, not a
    template's 64 KiB."""
    big = "x" * (128 * 1024)
    assert parse_plan(yaml.safe_dump(login(workload__requests__2__body=big))).requests[2].body == big
    found = problems(login(workload__requests__2__body=big + "${user}"))
    assert any(p == f"{ACCOUNT}.body" and "over the 65536" in m for p, m in found), found


@pytest.mark.parametrize("status", [["0200"], ["+200"], [" 2xx"], ["200 - 299"]])
def test_a_status_as_written_reads_back_equal(status):
    """What the engine reads as a status (checks.rs trims and takes a leading +) is kept as
    written, so the resolved plan reads back equal."""
    plan = parse_plan(yaml.safe_dump(login(workload__requests__2__check__0__status=status)))
    assert plan.requests[2].checks[0].status == tuple(status)
    assert parse_plan(plan.to_yaml()) == plan


def _redirecting(redirects: object, driver: str = "engine") -> dict:
    return {
        "driver": driver,
        "duration_s": 5,
        "targets": [{"url": "http://127.0.0.2:8080"}],
        "workload": {"requests": [{"path": "/a", "redirects": redirects}]},
        "load": {"model": "closed", "clients": 1},
    }


def test_redirects_read_round_trip_and_default_to_none():
    plan = parse_plan(yaml.safe_dump(_redirecting(3)))
    assert plan.requests[0].redirects == 3
    assert parse_plan(plan.to_yaml()) == plan
    assert parse_plan(LOGIN).requests[0].redirects == 0


@pytest.mark.parametrize("redirects", [21, -1, "3"])
def test_redirects_out_of_0_to_20_are_named_by_path(redirects):
    assert [p for p, _ in problems(_redirecting(redirects))] == ["workload.requests[0].redirects"]


def test_gatling_refuses_redirects_with_a_pointer_to_the_engine():
    found = problems(_redirecting(2, driver="gatling"))
    assert found == [("workload.requests[0].redirects", found[0][1])] and "driver: engine" in found[0][1]
