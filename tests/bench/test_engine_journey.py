"""The journey bench's page and job (bench/engine/journey.py): the page is the 1 KiB it says,
and every extraction of the journey finds its value in it (else the bench would measure
failed extractions, not a journey)."""

from __future__ import annotations

import json
import re

from bench.engine.journey import PAGE, journey, page
from loadfleet.v1 import job_pb2


def test_the_page_is_1_kib_of_json_holding_what_the_journey_takes():
    body = page()
    assert len(body) == 1024
    doc = json.loads(body)
    assert doc["user"]["id"] == 4242 and doc["v3"] == "3" * 64


def test_the_journey_extracts_two_values_into_its_template_and_checks_the_body():
    spec = job_pb2.JobSpec(requests=[job_pb2.RequestSpec(name="file", method="GET", path=PAGE, weight=1)])
    journey(spec, variables=6, think_ms=10)
    login, account = spec.requests
    assert (login.path, login.weight) == ("/login", 0)
    assert account.path == PAGE + "?user=${v0}&items=${v1}"
    assert list(spec.variables) == [f"v{i}" for i in range(6)]
    text = page().decode()
    assert account.extracts[0].json_pointer == "/user/id"
    found = [re.search(e.regex, text).group(1) for e in account.extracts[1:]]
    assert found == ["3", *(str(i) * 64 for i in range(4))]
    assert account.checks[0].body_contains in text
    assert [s.request for s in spec.session.once] == [0] and spec.session.steps[0].think_after.fixed_ms == 10
