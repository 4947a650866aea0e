"""The plan's structure: the published JSON Schema (`plan.schema.json`, copied to docs/)
and what its violations are called.

Integers are integers (JSON Schema counts 1.0 as one; the wire does not), and messages keep
the offending value short, say the schema's patterns in words, and say what to write for
text that YAML 1.1 would have read as a number or boolean (`1:30`, `yes`; yamlcore.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from loadfleet.controller.model.errors import Problem
from loadfleet.controller.plan.yamlcore import yaml11_hint


@cache
def plan_schema() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("plan.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def _strict_integer(checker: object, instance: object) -> bool:
    """JSON Schema counts 1.0 as an integer; wire fields are integers, so only int is one."""
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer),
)


def schema_problems(doc: dict[str, Any]) -> list[Problem]:
    validator = _Validator(plan_schema())
    problems = [Problem(_path(e.absolute_path), _schema_message(_deepest(e))) for e in validator.iter_errors(doc)]
    return sorted(problems, key=lambda p: p.path)


# The schema's patterns, said in words.
_PATTERN_MESSAGES = {
    "header_name": "a header name (or a cookie name) is a token "
    "(letters, digits and !#$%&'*+.^_`|~-; no spaces, colons, CR or LF)",
    "header_value": "a header value may not contain CR, LF or other control characters",
    "path": "a path starts with / and has no spaces or control characters (percent-encode them)",
    "variable": "a variable name is a letter or _, then letters, digits or _ (as in ${csrf})",
    "text": "control characters (CR, LF, ...) are not allowed here",
    "token_env": "the controller passes only its LOADFLEET_INFLUX_TOKEN* variables to a plan's InfluxDB "
    "(e.g. LOADFLEET_INFLUX_TOKEN_TEAM_A; docs/security.md)",
}


def _deepest(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For a value that fits none of a oneOf's forms (a sweep step is a number or a pair),
    the problem of the form it came closest to, not "not valid under any of the given schemas"."""
    if error.validator == "oneOf":
        fitting = [e for e in error.context if e.validator != "type"]  # the forms of the value's type
        if fitting:
            return jsonschema.exceptions.best_match(fitting)
    return error


def _schema_message(error: jsonschema.ValidationError) -> str:
    """jsonschema's message with the offending value kept short (a 1 MB string is one line)."""
    kind, limit = error.validator, error.validator_value
    if kind == "pattern":
        for name, message in _PATTERN_MESSAGES.items():
            if plan_schema()["$defs"][name]["pattern"] == limit:
                return f"{_short(repr(error.instance))}: {message}"
    if kind == "maxLength":
        return f"longer than {limit:,} characters"
    if kind in ("maxItems", "maxProperties"):
        return f"more than {limit:,} entries"
    if kind in ("maximum", "exclusiveMaximum"):
        return f"{_short(repr(error.instance))} is above the maximum of {limit:,}"
    if kind in ("type", "oneOf"):
        return _short(error.message, 300) + yaml11_hint(error.instance)
    return _short(error.message, 300)


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _path(parts: Iterable[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
