"""Credential headers never reach a run directory's plan.yaml in the clear."""

import pytest

from loadfleet.controller.model.credentials import redact_query
from loadfleet.controller.output.rundir import write_plan
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.plan.redact import REDACTED, has_redactions, is_sensitive, redact_plan, redact_plan_yaml

PLAN = """
duration_s: 1
targets: [{url: "http://127.0.0.1:1"}]
workload:
  requests:
    - path: /a
      headers: {Authorization: "Bearer s3cret-1", Cookie: "sid=s3cret-2", X-Api-Key: s3cret-3,
                Proxy-Authorization: "Basic s3cret-4", X-Vault-Token: s3cret-5, Accept: text/html}
    - {path: /b}
load: {model: closed, clients: 1}
"""


@pytest.mark.parametrize(
    "name, sensitive",
    [
        ("Authorization", True),
        ("authorization", True),
        ("Proxy-Authorization", True),
        ("Cookie", True),
        ("X-Api-Key", True),
        ("X-Vault-Token", True),
        ("X-Upstream-Password", True),
        ("X-Jwt", True),
        ("X-Private-Key", True),
        ("api_key", True),
        ("access_token", True),
        ("client_secret", True),
        ("sig", True),
        ("Accept", False),
        ("Content-Type", False),
        ("X-Request-Id", False),
        ("keyword", False),
        ("page", False),
    ],
)
def test_which_headers_are_credentials(name, sensitive):
    assert is_sensitive(name) is sensitive


def test_the_stored_plan_has_no_credential_and_still_reads_back(tmp_path):
    plan = parse_plan(PLAN)
    write_plan(tmp_path, plan.to_yaml())
    stored = (tmp_path / "plan.yaml").read_text()
    assert "s3cret" not in stored and "redacted" in stored.splitlines()[0]
    back = parse_plan(stored)
    assert back == redact_plan(plan)
    assert dict(back.requests[0].headers) == {
        "Accept": "text/html",
        "Authorization": REDACTED,
        "Cookie": REDACTED,
        "Proxy-Authorization": REDACTED,
        "X-Api-Key": REDACTED,
        "X-Vault-Token": REDACTED,
    }


def test_a_plan_without_credentials_is_stored_as_it_is():
    text = parse_plan(
        PLAN.replace("Authorization", "X-A")
        .replace("Cookie", "X-B")
        .replace("X-Api-Key", "X-C")
        .replace("X-Vault-Token", "X-D")
    ).to_yaml()
    assert redact_plan_yaml(text) == text


@pytest.mark.parametrize(
    "path, redacted",
    [
        ("/a?api_key=s3cret&page=2", "/a?api_key=<redacted>&page=2"),
        ("/a?page=2&access_token=s3cret#top", "/a?page=2&access_token=<redacted>#top"),
        ("/a?X-Jwt=s3cret&jwt=s3cret", "/a?X-Jwt=<redacted>&jwt=<redacted>"),
        ("/search?keyword=shoes&sort=asc", "/search?keyword=shoes&sort=asc"),
        ("/a", "/a"),
        ("/a?flag&key=", "/a?flag&key=<redacted>"),
    ],
)
def test_credential_query_values_are_redacted_and_the_rest_kept_exactly(path, redacted):
    assert redact_query(path) == redacted


def test_a_credential_in_a_query_reaches_neither_the_stored_plan_nor_the_request_name(tmp_path):
    plan = parse_plan(
        PLAN.replace("- {path: /b}", "- {path: '/b?api_key=s3cret-6&page=1'}").replace(
            "Accept: text/html}", "Accept: text/html, X-Jwt: s3cret-7, X-Private-Key: s3cret-8}"
        )
    )
    assert plan.requests[1].path == "/b?api_key=s3cret-6&page=1"  # what the agents send
    assert plan.requests[1].name == "/b?api_key=<redacted>&page=1"  # what every output shows
    write_plan(tmp_path, plan.to_yaml())
    stored = (tmp_path / "plan.yaml").read_text()
    assert "s3cret" not in stored
    back = parse_plan(stored)
    assert back == redact_plan(plan) and has_redactions(back)
