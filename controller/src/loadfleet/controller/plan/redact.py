"""Credentials in plans stay out of run directories.

A plan's requests may carry credentials (credentials.py says which header and query names
hold them). Agents need them to send the requests; a run directory, which people copy,
attach to tickets and publish as reports, does not. What is stored is the plan with
those values replaced, so it still reads back as a plan (and shows which headers were sent).
"""

from __future__ import annotations

import csv
import io
from dataclasses import replace

from loadfleet.controller.model.credentials import REDACTED, is_sensitive, redact_query
from loadfleet.controller.plan import yamlsafe
from loadfleet.controller.plan.model import Plan

_NOTE = (
    "# Values of credential headers, query parameters, feed columns and TLS client keys are redacted in the run"
    " directory (docs/security.md).\n"
)


def _redacted_headers(headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    return type(headers)((k, REDACTED if is_sensitive(k) else v) for k, v in headers)


def redact_plan(plan: Plan) -> Plan:
    """The plan with every credential header and query value replaced by REDACTED."""
    requests = tuple(replace(r, headers=_redacted_headers(r.headers), path=redact_query(r.path)) for r in plan.requests)
    targets = tuple(
        replace(t, tls=replace(t.tls, client_key_pem=REDACTED)) if t.tls and t.tls.client_key_pem else t
        for t in plan.targets
    )
    return replace(plan, requests=requests, targets=targets)


def redact_plan_yaml(plan_yaml: str) -> str:
    """A resolved plan's YAML (Plan.to_yaml) with credential header values replaced; a note
    at the top says so when anything was."""
    doc = yamlsafe.load(plan_yaml)
    changed = False
    workload = doc.get("workload") if isinstance(doc, dict) else None
    for request in (workload or {}).get("requests", []):
        if not isinstance(request, dict):
            continue
        path = request.get("path")
        if isinstance(path, str) and redact_query(path) != path:
            request["path"] = redact_query(path)
            changed = True
        headers = request.get("headers")
        if isinstance(headers, dict):
            for name in headers:
                if is_sensitive(name) and headers[name] != REDACTED:
                    headers[name] = REDACTED
                    changed = True
    changed = _redact_feed((workload or {}).get("feed")) or changed
    changed = _redact_client_keys(doc.get("targets") if isinstance(doc, dict) else None) or changed
    return _NOTE + yamlsafe.dump(doc) if changed else plan_yaml


def _redact_client_keys(targets: object) -> bool:
    """Each target's TLS client key (targettls.py) replaced in place; whether any was."""
    changed = False
    for target in targets if isinstance(targets, list) else []:
        tls = target.get("tls") if isinstance(target, dict) else None
        if isinstance(tls, dict) and tls.get("client_key_pem") not in (None, REDACTED):
            tls["client_key_pem"] = REDACTED
            changed = True
    return changed


def _redact_feed(feed: object) -> bool:
    """A feed's cells in columns named like credentials (`password`, `api_key`) replaced in
    place; whether any was."""
    if not isinstance(feed, dict) or not isinstance(feed.get("rows_csv"), str):
        return False
    secret = [i for i, name in enumerate(feed.get("columns", ())) if isinstance(name, str) and is_sensitive(name)]
    if not secret:
        return False
    rows = [row[:] for row in csv.reader(io.StringIO(feed["rows_csv"], newline=""))]
    for row in rows:
        for i in secret:
            if i < len(row):
                row[i] = REDACTED
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    feed["rows_csv"] = text.getvalue()
    return True


def has_redactions(plan: Plan) -> bool:
    """Whether a plan read back from a run directory lost credential values to redaction."""
    return any(value == REDACTED for r in plan.requests for _, value in r.headers) or any(
        f"={REDACTED}" in r.path for r in plan.requests
    )
