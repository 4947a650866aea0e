"""What of a journey the Gatling driver does not run: the guard before a JVM starts.

JobSimulation (agent/gatling) runs a journey as the engine does: templates (parsed by the
engine's grammar, rendered per request from the user's Gatling session), extractions and
checks (judged by its own Judge on each response, every check counted by name), `once`,
on_fail / on_missing (continue, restart, stop), and `cookies.off` (the user's jar emptied
before each request). Its job file is the JobSpec as the controller made it: templates and
their `$${` escapes are JobSimulation's to read.

What it would read otherwise than the engine is refused here, naming each field, as the
plan's validation does (controller plan/gatlingjourney.py), for a job that got past another
controller: JSONPath filters (Gatling's JSONPath reads them by its own rules) and regex syntax
only Rust's regex crate reads alike (`(?P<name>...)`, POSIX classes `[[:alpha:]]`).
"""

from __future__ import annotations

from collections.abc import Iterator

from loadfleet.v1 import job_pb2

from .errors import JobRefused

USE_THE_ENGINE = "use `driver: engine`"
# Rust regex syntax Java's java.util.regex reads otherwise (or not at all), and what it is.
RUST_ONLY_REGEX = {"(?P<": "a named group (?P<name>...): write (?<name>...)", "[[:": "a POSIX class [[:name:]]"}


def journey_problems(spec: job_pb2.JobSpec) -> list[str]:
    """What of a journey the Gatling driver does not run, each named by its field in the job."""
    problems = []
    for i, request in enumerate(spec.requests):
        where = f"requests[{i}] ({request.name})"
        problems += [
            f"{where}.{field}: {path!r} has a filter (Gatling's JSONPath reads ?(...) otherwise)"
            for field, path in _json_paths(request)
            if "?" in path
        ]
        problems += [
            f"{where}.{field}: {pattern!r} holds {what}"
            for field, pattern in _regexes(request)
            for syntax, what in RUST_ONLY_REGEX.items()
            if syntax in pattern
        ]
    for i, scenario in enumerate(spec.scenarios):  # each scenario's own requests
        problems += [f"scenarios[{i}] ({scenario.name}).{p}" for p in journey_problems(scenario.job)]
    return problems


def _json_paths(request: job_pb2.RequestSpec) -> Iterator[tuple[str, str]]:
    for j, extract in enumerate(request.extracts):
        if extract.WhichOneof("source") == "json_path":
            yield f"extracts[{j}].json_path", extract.json_path
    for j, check in enumerate(request.checks):
        if check.HasField("json_path"):
            yield f"checks[{j}].json_path.path", check.json_path.path


def _regexes(request: job_pb2.RequestSpec) -> Iterator[tuple[str, str]]:
    for j, extract in enumerate(request.extracts):
        if extract.WhichOneof("source") == "regex":
            yield f"extracts[{j}].regex", extract.regex
    for j, check in enumerate(request.checks):
        if check.body_regex:
            yield f"checks[{j}].body_regex", check.body_regex
        if check.header.WhichOneof("test") == "regex":
            yield f"checks[{j}].header.regex", check.header.regex


def refuse_journeys(spec: job_pb2.JobSpec) -> None:
    """JobRefused when the job holds what the Gatling driver does not run (journey_problems)."""
    if problems := journey_problems(spec):
        raise JobRefused(
            f"the Gatling driver reads these otherwise than the engine: {'; '.join(problems)}; {USE_THE_ENGINE}"
        )
