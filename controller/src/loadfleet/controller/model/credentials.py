"""Which names in a request hold credentials: header names and query parameters.

A plan's requests may carry credentials in headers (Authorization, a session cookie, an API
key) or in the query of their path (`?api_key=...`, `&access_token=...`). Agents need them to
send the requests; nothing people read or publish does (run directories, request names,
InfluxDB, reports): see redact.py for the plan that is stored.

A name is a credential's when it is a well-known one, when it contains a word that says so
(X-Vault-Token, X-Upstream-Password, client_secret), or when one of its parts, split at `-`
and `_`, is such a word on its own (X-Jwt, X-Private-Key, api_key, sig): `keyword` or
`monkey` are not. Over-redacting a harmless name costs a less readable plan.yaml; missing a
secret leaks it, so the list errs on the side of redacting.
"""

from __future__ import annotations

import re

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
# Anywhere in a name.
_SENSITIVE_WORDS = ("token", "secret", "password", "passwd", "api-key", "apikey", "credential", "session", "auth")
# As a whole part of a name.
_SENSITIVE_PARTS = frozenset({"key", "jwt", "private", "sig", "signature", "bearer", "pwd", "pass", "sid"})
# One `name=value` of a query: the value runs to the next `&` or `#`.
_QUERY_PARAM = re.compile(r"(?P<name>[^&=#]*)=(?P<value>[^&#]*)")


def is_sensitive(name: str) -> bool:
    """Whether a header or query parameter of this name holds a credential."""
    lowered = name.strip().lower().replace("_", "-")
    if lowered in SENSITIVE_HEADERS or any(word in lowered for word in _SENSITIVE_WORDS):
        return True
    return any(part in _SENSITIVE_PARTS for part in lowered.split("-"))


def redact_query(path: str) -> str:
    """`path` with the values of its credential query parameters replaced by REDACTED (the
    rest exactly as written)."""
    before, mark, query = path.partition("?")
    if not mark:
        return path

    def value(match: re.Match[str]) -> str:
        return f"{match['name']}={REDACTED}" if is_sensitive(match["name"]) else match[0]

    return before + mark + _QUERY_PARAM.sub(value, query)
