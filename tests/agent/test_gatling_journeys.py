"""The Gatling driver's guard against journeys it does not run yet (gatling_journeys.py): each
journey part refused with its field and a pointer to the engine, templates found by the engine's
grammar (the shared case table), and escaped texts sent as the engine sends them. No process."""

import json
from pathlib import Path

import pytest

from loadfleet.agent.errors import JobRefused
from loadfleet.agent.gatling_journeys import journey_problems, literal, literal_spec, refuse_journeys, template_at
from loadfleet.v1 import job_pb2

CASES = json.loads((Path(__file__).parents[1] / "wire" / "template_cases.json").read_text())["cases"]


def plain_spec() -> job_pb2.JobSpec:
    return job_pb2.JobSpec(
        driver=job_pb2.DRIVER_GATLING,
        targets=[job_pb2.Target(url="http://127.0.0.1:1")],
        requests=[
            job_pb2.RequestSpec(
                name="home",
                method="PATCH",
                path="/a?price=$${total}",
                headers=[job_pb2.Header(name="X-Cost", value="$$$${x} and $5")],
                body=b"\x00$${raw}",
            )
        ],
    )


@pytest.mark.parametrize("case", CASES, ids=[c["template"] or "empty" for c in CASES])
def test_a_template_is_found_where_the_engines_grammar_opens_one(case):
    text = case["template"].encode()
    pieces = case.get("pieces")
    if pieces is not None and all("literal" in p for p in pieces):
        assert template_at(text) is None
        assert literal(text) == "".join(p["literal"] for p in pieces).encode(), "sent as the engine sends it"
    elif pieces is not None:
        assert template_at(text) is not None
    else:  # a refused template: it opens at or before the refused `${`
        assert template_at(text) is not None and template_at(text) <= case["error"]["offset"]


def test_a_plain_job_passes_and_is_sent_with_its_escapes_applied():
    spec = plain_spec()
    assert journey_problems(spec) == []
    refuse_journeys(spec)
    sent = literal_spec(spec).requests[0]
    assert (sent.path, sent.headers[0].value, sent.body) == ("/a?price=${total}", "$${x} and $5", b"\x00${raw}")
    assert spec.requests[0].path == "/a?price=$${total}", "the job itself is left as it was"


def journey(change) -> job_pb2.JobSpec:
    spec = plain_spec()
    change(spec)
    return spec


@pytest.mark.parametrize(
    "spec, problem",
    [
        (journey(lambda s: s.variables.append("csrf")), "variables (csrf)"),
        (
            journey(lambda s: s.session.once.append(job_pb2.SessionStep(request=0))),
            "session.once (steps run once per user)",
        ),
        (journey(lambda s: s.cookies.CopyFrom(job_pb2.Cookies(off=True))), "cookies.off"),
        (
            journey(lambda s: s.requests[0].extracts.append(job_pb2.Extract(var=0, regex="x"))),
            "requests[0] (home).extracts",
        ),
        (
            journey(lambda s: s.requests[0].checks.append(job_pb2.Check(name="ok", status=["200"]))),
            "requests[0] (home).checks",
        ),
        (
            journey(lambda s: setattr(s.requests[0], "path", "/a/${user}")),
            "requests[0] (home).path: a template at byte 3",
        ),
        (
            journey(lambda s: setattr(s.requests[0], "body", b"id=$$${uuid}")),
            "requests[0] (home).body: a template at byte 5",
        ),
        (
            journey(lambda s: s.requests[0].headers[0].MergeFrom(job_pb2.Header(value="${csrf"))),
            "requests[0] (home).headers[0].value: a template at byte 0",
        ),
    ],
)
def test_each_journey_part_refuses_the_job_naming_its_field(spec, problem):
    [found] = journey_problems(spec)
    assert found.startswith(problem), found
    with pytest.raises(JobRefused, match=r"does not run journeys yet .*; use `driver: engine`$") as refused:
        refuse_journeys(spec)
    assert problem in str(refused.value)


def test_every_problem_is_named_at_once():
    spec = journey(lambda s: (s.variables.append("csrf"), s.requests[0].checks.append(job_pb2.Check(name="ok"))))
    spec.requests.append(job_pb2.RequestSpec(name="cart", path="/cart/${csrf}"))
    assert journey_problems(spec) == [
        "variables (csrf)",
        "requests[0] (home).checks",
        "requests[1] (cart).path: a template at byte 6",
    ]
