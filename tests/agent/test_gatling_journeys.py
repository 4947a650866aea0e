"""The Gatling driver's guard (gatling_journeys.py): a journey passes, what Gatling's libraries
read otherwise than the engine (JSONPath filters, Rust-only regex syntax) refuses the job with
its field and a pointer to the engine. No process."""

import pytest

from loadfleet.agent.errors import JobRefused
from loadfleet.agent.gatling_journeys import journey_problems, refuse_journeys
from loadfleet.v1 import job_pb2


def login_spec() -> job_pb2.JobSpec:
    """The lab's login journey as a job: templates, extractions, checks, once, on_fail."""
    return job_pb2.JobSpec(
        driver=job_pb2.DRIVER_GATLING,
        targets=[job_pb2.Target(url="http://127.0.0.1:1")],
        variables=["csrf", "items"],
        requests=[
            job_pb2.RequestSpec(
                name="login-page",
                path="/login.php",
                extracts=[job_pb2.Extract(var=0, form_field="csrf", on_missing=job_pb2.ON_FAIL_RESTART)],
                checks=[job_pb2.Check(name="login form", status=["200"], body_contains='name="csrf"')],
            ),
            job_pb2.RequestSpec(
                name="login",
                method="POST",
                path="/login.php",
                body=b"user=user${user}&csrf=${csrf:url}",
                checks=[
                    job_pb2.Check(
                        name="logged in",
                        status=["302"],
                        header=job_pb2.HeaderCondition(name="Location", regex="^/account"),
                        on_fail=job_pb2.ON_FAIL_STOP,
                    )
                ],
            ),
            job_pb2.RequestSpec(
                name="account",
                path="/account.php?x=$${literal}",
                extracts=[
                    job_pb2.Extract(var=1, regex=r'data-items="(\d+)"'),
                    job_pb2.Extract(var=1, json_path="$..n"),
                ],
                checks=[job_pb2.Check(name="json", json_path=job_pb2.JsonCondition(path="$.a[0].b", exists=True))],
            ),
        ],
        session=job_pb2.Session(once=[job_pb2.SessionStep(request=0), job_pb2.SessionStep(request=1)]),
        cookies=job_pb2.Cookies(off=True),
    )


def test_a_journey_passes_the_guard():
    spec = login_spec()
    assert journey_problems(spec) == []
    refuse_journeys(spec)


def changed(change) -> job_pb2.JobSpec:
    spec = login_spec()
    change(spec)
    return spec


@pytest.mark.parametrize(
    "spec, problem",
    [
        (
            changed(lambda s: s.requests[2].extracts[1].MergeFrom(job_pb2.Extract(json_path="$.a[?@.n > 1]"))),
            "requests[2] (account).extracts[1].json_path: '$.a[?@.n > 1]' has a filter",
        ),
        (
            changed(lambda s: setattr(s.requests[2].checks[0].json_path, "path", "$[?(@.ok)]")),
            "requests[2] (account).checks[0].json_path.path: '$[?(@.ok)]' has a filter",
        ),
        (
            changed(lambda s: setattr(s.requests[2].extracts[0], "regex", r"(?P<n>\d+)")),
            "requests[2] (account).extracts[0].regex: '(?P<n>\\\\d+)' holds a named group",
        ),
        (
            changed(lambda s: setattr(s.requests[0].checks[0], "body_regex", "[[:alpha:]]")),
            "requests[0] (login-page).checks[0].body_regex: '[[:alpha:]]' holds a POSIX class",
        ),
        (
            changed(lambda s: setattr(s.requests[1].checks[0].header, "regex", "[[:digit:]]")),
            "requests[1] (login).checks[0].header.regex: '[[:digit:]]' holds a POSIX class",
        ),
    ],
)
def test_what_gatling_reads_otherwise_refuses_the_job_naming_its_field(spec, problem):
    [found] = journey_problems(spec)
    assert found.startswith(problem), found
    with pytest.raises(
        JobRefused, match=r"reads these otherwise than the engine: .*; use `driver: engine`$"
    ) as refused:
        refuse_journeys(spec)
    assert problem in str(refused.value)


def test_every_problem_is_named_at_once():
    spec = changed(lambda s: setattr(s.requests[0].checks[0], "body_regex", "[[:alpha:]](?P<x>y)"))
    spec.requests[2].checks[0].json_path.path = "$[?@]"
    assert [p.split(":")[0] for p in journey_problems(spec)] == [
        "requests[0] (login-page).checks[0].body_regex",
        "requests[0] (login-page).checks[0].body_regex",
        "requests[2] (account).checks[0].json_path.path",
    ]
