"""What of a journey the gatling driver cannot run (docs/plans.md "Journeys", "On the
Gatling driver"), each refused by its path in the plan with what to do instead.

JobSimulation (agent/gatling) runs a journey's templates, extractions, checks, `once`,
on_fail / on_missing rules and `cookies: false` as the engine does, judging every response
itself. Two things differ from the engine's libraries and are refused rather than run with
other results (and `redirects`, which JobSimulation does not follow):

- JSONPath filters (`?(...)`): Gatling's JSONPath reads them by its own rules, not RFC
  9535's (the engine's serde_json_path); dot, index, wildcard, slices and `..` agree.
- Regex syntax only Rust's regex crate reads alike: `(?P<name>...)` (Java: a syntax error)
  and POSIX classes `[[:alpha:]]` (Java: a set of the letters). Look-around and
  backreferences are refused for every driver (patterns.py).

The agent refuses the same in a job (agent gatling_journeys.py), for a job that got past
another controller.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from loadfleet.controller.model.errors import Problem
from loadfleet.controller.plan.journeys import ExtractSource, HeaderTest
from loadfleet.controller.plan.model import Request

_ENGINE = "use `driver: engine`"
_NO_REDIRECTS = "the gatling driver does not follow redirects (loadfleet's simulation turns them off)"
# Rust regex syntax Java's java.util.regex reads otherwise (or not at all).
_RUST_ONLY_REGEX = {"(?P<": "a named group (?P<name>...): write (?<name>...)", "[[:": "a POSIX class [[:name:]]"}


def gatling_journey_problems(requests: Sequence[Request]) -> list[Problem]:
    """The journey parts of `requests` the gatling driver refuses, by path."""
    problems = []
    for i, request in enumerate(requests):
        if request.redirects:  # JobSimulation turns Gatling's redirect following off
            problems.append(Problem(f"workload.requests[{i}].redirects", f"{_NO_REDIRECTS}; {_ENGINE}"))
        for where, path in _json_paths(request, f"workload.requests[{i}]"):
            if "?" in path:
                why = f"{path!r}: Gatling's JSONPath reads filters (?...) by other rules than the engine's; {_ENGINE}"
                problems.append(Problem(where, why))
        for where, regex in _regexes(request, f"workload.requests[{i}]"):
            problems += [
                Problem(where, f"{regex!r}: {what} is read otherwise by Java's regex on Gatling; {_ENGINE}")
                for syntax, what in _RUST_ONLY_REGEX.items()
                if syntax in regex
            ]
    return problems


def _json_paths(request: Request, path: str) -> Iterator[tuple[str, str]]:
    for j, extract in enumerate(request.extracts):
        if extract.source is ExtractSource.JSON_PATH:
            yield f"{path}.extract[{j}].json_path", extract.argument
    for j, check in enumerate(request.checks):
        if check.json_path is not None:
            yield f"{path}.check[{j}].json_path.path", check.json_path.path


def _regexes(request: Request, path: str) -> Iterator[tuple[str, str]]:
    for j, extract in enumerate(request.extracts):
        if extract.source is ExtractSource.REGEX:
            yield f"{path}.extract[{j}].regex", extract.argument
    for j, check in enumerate(request.checks):
        if check.body_regex:
            yield f"{path}.check[{j}].body_regex", check.body_regex
        if check.header is not None and check.header.test is HeaderTest.REGEX:
            yield f"{path}.check[{j}].header.regex", check.header.value
