"""Credentials in plans stay out of run directories.

A plan's requests may carry credentials (an Authorization header, a session cookie, an
API key). Agents need them to send the requests; a run directory, which people copy,
attach to tickets and publish as reports, does not. What is stored is the plan with
those header values replaced, so it still reads back as a plan (and shows which
headers were sent).
"""

from __future__ import annotations

from dataclasses import replace

from . import yamlsafe
from .plan import Plan

REDACTED = "<redacted>"
# Header names (lower case) whose values are credentials.
SENSITIVE_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",
        "api-key",
        "apikey",
        "x-auth-token",
        "x-access-token",
        "x-csrf-token",
        "x-xsrf-token",
        "x-amz-security-token",
    }
)
# A custom header whose name says it holds a secret is treated the same (X-Vault-Token, X-Upstream-Password, ...).
_SENSITIVE_WORDS = ("token", "secret", "password", "passwd", "api-key", "apikey", "credential", "session", "auth")
_NOTE = "# Values of credential headers are redacted in the run directory (docs/security.md).\n"


def is_sensitive(header: str) -> bool:
    name = header.strip().lower()
    return name in SENSITIVE_HEADERS or any(word in name for word in _SENSITIVE_WORDS)


def _redacted_headers(headers):
    return type(headers)((k, REDACTED if is_sensitive(k) else v) for k, v in headers)


def redact_plan(plan: Plan) -> Plan:
    """The plan with every credential header value replaced by REDACTED."""
    requests = tuple(replace(r, headers=_redacted_headers(r.headers)) if r.headers else r for r in plan.requests)
    return replace(plan, requests=requests)


def redact_plan_yaml(plan_yaml: str) -> str:
    """A resolved plan's YAML (Plan.to_yaml) with credential header values replaced; a note
    at the top says so when anything was."""
    doc = yamlsafe.load(plan_yaml)
    changed = False
    workload = doc.get("workload") if isinstance(doc, dict) else None
    for request in (workload or {}).get("requests", []):
        headers = request.get("headers") if isinstance(request, dict) else None
        if isinstance(headers, dict):
            for name in headers:
                if is_sensitive(name) and headers[name] != REDACTED:
                    headers[name] = REDACTED
                    changed = True
    return _NOTE + yamlsafe.dump(doc) if changed else plan_yaml


def has_redactions(plan: Plan) -> bool:
    """Whether a plan read back from a run directory lost credential values to redaction."""
    return any(value == REDACTED for r in plan.requests for _, value in r.headers)
