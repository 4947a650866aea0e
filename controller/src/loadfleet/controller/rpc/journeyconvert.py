"""A plan's journey -> the JobSpec's fields (job.proto: RequestSpec.extracts and checks,
JobSpec.variables and cookies): the conversion convert.py's `_job_spec` calls.

Templates stay text: the engine parses them, naming variables by their slot in
`JobSpec.variables` (slot i is variables[i]), which lists every extracted variable in the
order the plan first extracts it. An extraction names its variable by that slot.
"""

from __future__ import annotations

from loadfleet.controller.plan.journeycheck import variables
from loadfleet.controller.plan.journeys import Check, Cookies, Extract, ExtractSource, HeaderTest, OnFail
from loadfleet.controller.plan.workload import Request
from loadfleet.v1 import job_pb2

_ON_FAIL = {
    OnFail.CONTINUE: job_pb2.ON_FAIL_CONTINUE,
    OnFail.RESTART: job_pb2.ON_FAIL_RESTART,
    OnFail.STOP: job_pb2.ON_FAIL_STOP,
}


def add_journey(spec: job_pb2.JobSpec, requests: tuple[Request, ...], cookies: Cookies) -> None:
    """Fills `spec` (its requests already in `requests`' order) with a workload's journey:
    the variables, each request's extractions, checks and redirects, and the cookie jar."""
    names = variables(requests)
    slots = {name: slot for slot, name in enumerate(names)}
    spec.variables.extend(names)
    for request_pb, request in zip(spec.requests, requests, strict=True):
        request_pb.extracts.extend(extract_to_proto(e, slots[e.var]) for e in request.extracts)
        request_pb.checks.extend(check_to_proto(c) for c in request.checks)
        request_pb.max_redirects = request.redirects
    if cookies != Cookies():
        spec.cookies.CopyFrom(cookies_to_proto(cookies))


def extract_to_proto(extract: Extract, slot: int) -> job_pb2.Extract:
    pb = job_pb2.Extract(
        var=slot,
        occurrence=extract.occurrence,
        on_missing=_ON_FAIL[extract.on_missing],
        default_value=extract.default,
        name=extract.name,
    )
    if extract.source is ExtractSource.STATUS:
        pb.status = True
    else:  # a oneof member set to its default value still selects it (json_pointer "": the whole body)
        setattr(pb, extract.source.value, extract.argument)
    return pb


def check_to_proto(check: Check) -> job_pb2.Check:
    pb = job_pb2.Check(
        name=check.name,
        status=list(check.status),
        body_contains=check.body_contains,
        body_lacks=check.body_lacks,
        body_regex=check.body_regex,
        latency_below_ms=check.latency_below_ms,
        on_fail=_ON_FAIL[check.on_fail],
    )
    if check.header:
        pb.header.name = check.header.name
        absent = check.header.test is HeaderTest.ABSENT
        setattr(pb.header, check.header.test.value, True if absent else check.header.value)
    if check.json_path:
        pb.json_path.path = check.json_path.path
        if check.json_path.equals is None:
            pb.json_path.exists = True
        else:
            pb.json_path.equals = check.json_path.equals
    return pb


def cookies_to_proto(cookies: Cookies) -> job_pb2.Cookies:
    return job_pb2.Cookies(off=not cookies.enabled, max_cookies=cookies.max_cookies, max_bytes=cookies.max_bytes)
