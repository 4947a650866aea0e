"""What `validate` refuses in a journey (docs/plans.md, "Journeys"), each problem with its
path in the plan: templates the engine would refuse (templates.py), a variable no request
extracts, or one read before any request of the session extracts it ("a template that can
never be filled": `once`, then `steps`), variables named as built-ins, regexes the engine's
regex crate cannot run (look-around, backreferences) or over its bound, status sets, check
names (unique, at most 64 bytes), journeys where no user exists (the open model without a
session) and on the Gatling driver, which does not map them yet.

Only requests written inline carry journeys (a manifest's are plain files), so the n-th
request is `workload.requests[n]`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from loadfleet.controller.model.driver import Driver
from loadfleet.controller.model.errors import Problem
from loadfleet.controller.model.load import LoadModel
from loadfleet.controller.plan.journeys import (
    EXTRACT_PREFIX,
    MAX_CHECK_NAME_BYTES,
    MAX_DEFAULT_BYTES,
    MAX_VARIABLES,
    OCCURRENCE_SOURCES,
    Check,
    Extract,
    ExtractSource,
    HeaderTest,
    OnFail,
)
from loadfleet.controller.plan.model import Request, Session
from loadfleet.controller.plan.patterns import regex_problems
from loadfleet.controller.plan.templates import (
    BUILTIN_NAMES,
    ErrorKind,
    Literal,
    Piece,
    TemplateError,
    TemplateNames,
    is_static,
    parse_template,
    variables_read,
)

_GATLING = "the gatling driver does not run journeys yet (checks, extractions, templates, `once`): use `driver: engine`"
_GATLING_REDIRECTS = (
    "the gatling driver does not follow redirects (loadfleet's simulation turns them off): use `driver: engine`"
)
_NO_USERS = "an open model without a session has no users"


@dataclass(frozen=True)
class JourneyFacts:
    """What of the plan around its requests decides what a journey may do."""

    model: LoadModel
    driver: Driver
    session: Session | None
    cookies_given: bool  # `workload.cookies` is a mapping (a jar's caps)
    cookies_off: bool = False  # `workload.cookies: false`

    @property
    def has_users(self) -> bool:
        """Users (state that lives across requests) exist: closed, users, open with a session."""
        return self.model is not LoadModel.OPEN or self.session is not None


def variables(requests: Sequence[Request]) -> list[str]:
    """Every extracted variable, in the order of first extraction in the plan (JobSpec.variables)."""
    return list(dict.fromkeys(e.var for r in requests for e in r.extracts))


def check_names(requests: Sequence[Request]) -> frozenset[str]:
    """What a check_pass_pct threshold may name: the checks, and "extract <var>"."""
    return frozenset(c.name for r in requests for c in r.checks) | {e.name for r in requests for e in r.extracts}


def journey_problems(requests: Sequence[Request], facts: JourneyFacts) -> list[Problem]:
    names = TemplateNames(variables=frozenset(variables(requests)))
    problems = []
    if len(names.variables) > MAX_VARIABLES:
        problems.append(
            Problem("workload.requests", f"{len(names.variables)} variables: a job holds at most {MAX_VARIABLES}")
        )
    for i, request in enumerate(requests):
        path = f"workload.requests[{i}]"
        problems += _template_problems(request, path, names)
        problems += [p for j, e in enumerate(request.extracts) for p in _extract_problems(e, f"{path}.extract[{j}]")]
        problems += [p for j, c in enumerate(request.checks) for p in _check_problems(c, f"{path}.check[{j}]", names)]
        problems += _duplicate_extract_problems(request.extracts, path)
    problems += _check_name_problems(requests)
    if facts.session:
        problems += _session_order_problems(requests, facts.session)
    problems += _model_problems(requests, facts)
    return problems


# ---- templates -------------------------------------------------------------------------


def _templates(request: Request, path: str) -> Iterator[tuple[str, str]]:
    """(path in the plan, text) of each place of a request that may hold a template."""
    yield f"{path}.path", request.path
    for name, value in request.headers:
        yield f"{path}.headers.{name}", value
    yield f"{path}.body", request.body


def _check_templates(check: Check, path: str) -> Iterator[tuple[str, str]]:
    yield f"{path}.body_contains", check.body_contains
    yield f"{path}.body_lacks", check.body_lacks


def _parsed(text: str, names: TemplateNames) -> list[Piece]:
    """A text's pieces; text without `${` is one literal whatever its length (the static path)."""
    return parse_template(text, names) if "${" in text else []


def _template_problems(request: Request, path: str, names: TemplateNames) -> list[Problem]:
    return [p for where, text in _templates(request, path) if (p := _one_template_problem(where, text, names))]


def _one_template_problem(where: str, text: str, names: TemplateNames) -> Problem | None:
    try:
        _parsed(text, names)
    except TemplateError as exc:
        message = str(exc)
        if exc.kind is ErrorKind.UNKNOWN_VARIABLE:
            known = ", ".join(sorted(names.variables)) or "none: no request extracts a variable"
            message += f"; the plan's variables: {known}"
        return Problem(where, message)
    return None


def _reads(texts: Iterator[tuple[str, str]], names: TemplateNames) -> list[tuple[str, str]]:
    """(path, variable) each parsable template reads; refused templates are told elsewhere."""
    read = []
    for where, text in texts:
        try:
            read += [(where, var) for var in variables_read(_parsed(text, names))]
        except TemplateError:
            continue
    return read


def _templated(request: Request, names: TemplateNames) -> bool:
    """The request holds a template (or an escaped `$${`): its text is not sent as written."""
    for _, text in _templates(request, ""):
        try:
            pieces = _parsed(text, names)
        except TemplateError:
            return True
        written = "".join(p.text for p in pieces if isinstance(p, Literal))
        if "${" in text and not (is_static(pieces) and written == text):
            return True
    return False


# ---- extractions and checks -----------------------------------------------------------


def _extract_problems(extract: Extract, path: str) -> list[Problem]:
    problems = []
    if extract.var in BUILTIN_NAMES:
        builtins = ", ".join(sorted(BUILTIN_NAMES))
        problems.append(Problem(f"{path}.var", f"'{extract.var}' is a built-in ({builtins}): choose another name"))
    where = f"{path}.{extract.source.value}"
    if extract.source is ExtractSource.REGEX:
        problems += regex_problems(extract.argument, where)
    if extract.source is ExtractSource.JSON_POINTER and extract.argument and not extract.argument.startswith("/"):
        problems.append(Problem(where, f"{extract.argument!r}: a JSON pointer is empty or starts with /"))
    if extract.source is ExtractSource.JSON_PATH and not extract.argument.startswith("$"):
        problems.append(Problem(where, f"{extract.argument!r}: a JSONPath starts with $ (as $.items[0].id)"))
    if extract.occurrence and extract.source not in OCCURRENCE_SOURCES:
        why = f"only regex and json_path find an occurrence, not {extract.source.value}"
        problems.append(Problem(f"{path}.occurrence", why))
    if len(extract.default.encode("utf-8", "surrogatepass")) > MAX_DEFAULT_BYTES:
        problems.append(Problem(f"{path}.default", f"over the {MAX_DEFAULT_BYTES} bytes a variable may hold"))
    return problems


def extract_sources_problem(doc: dict[str, object], path: str) -> Problem | None:
    """An `extract` entry names exactly one source (read before its value is built)."""
    given = [s.value for s in ExtractSource if s.value in doc]
    if len(given) == 1:
        return None
    sources = ", ".join(s.value for s in ExtractSource)
    said = f"not {' and '.join(given)}" if given else "none given"
    return Problem(path, f"give exactly one of {sources} ({said})")


def _duplicate_extract_problems(extracts: Sequence[Extract], path: str) -> list[Problem]:
    seen: dict[str, int] = {}
    problems = []
    for j, extract in enumerate(extracts):
        if extract.var in seen:
            problems.append(
                Problem(f"{path}.extract[{j}].var", f"'{extract.var}' is extracted by extract[{seen[extract.var]}] too")
            )
        seen.setdefault(extract.var, j)
    return problems


def _check_problems(check: Check, path: str, names: TemplateNames) -> list[Problem]:
    problems = []
    if len(check.name.encode("utf-8", "surrogatepass")) > MAX_CHECK_NAME_BYTES:
        problems.append(Problem(f"{path}.name", f"longer than {MAX_CHECK_NAME_BYTES} bytes"))
    if check.name.startswith(EXTRACT_PREFIX):
        problems.append(Problem(f"{path}.name", f"'{EXTRACT_PREFIX}…' names an extraction's counts: choose another"))
    conditions = (check.status, check.body_contains, check.body_lacks, check.body_regex, check.header, check.json_path)
    if not any(conditions) and not check.latency_below_ms:
        problems.append(Problem(path, "a check needs at least one condition (status, body_contains, ...)"))
    problems += [Problem(f"{path}.status[{k}]", _STATUS_HINT) for k, s in enumerate(check.status) if not _is_status(s)]
    problems += [p for where, text in _check_templates(check, path) if (p := _one_template_problem(where, text, names))]
    return problems + _check_pattern_problems(check, path)


def _check_pattern_problems(check: Check, path: str) -> list[Problem]:
    """A check's regexes and JSONPath."""
    problems = []
    if check.body_regex:
        problems += regex_problems(check.body_regex, f"{path}.body_regex")
    if check.header and check.header.test is HeaderTest.REGEX:
        problems += regex_problems(check.header.value, f"{path}.header.regex")
    if check.json_path and not check.json_path.path.startswith("$"):
        problems.append(Problem(f"{path}.json_path.path", f"{check.json_path.path!r}: a JSONPath starts with $"))
    return problems


_STATUS_HINT = "a code in 100-599, a class like '2xx' or a range like '200-299'"
_WHOLE = re.compile(r"\+?[0-9]+")


def _is_status(item: str) -> bool:
    """As the engine reads a status item (checks.rs status_range)."""

    def code(text: str) -> int | None:
        text = text.strip()
        return int(text) if _WHOLE.fullmatch(text) and 100 <= int(text) <= 599 else None

    if item.endswith(("xx", "XX")):
        return code(item[:-2] + "00") is not None
    low, dash, high = item.partition("-")
    low_code, high_code = code(low), code(high if dash else low)
    return low_code is not None and high_code is not None and low_code <= high_code


def _check_name_problems(requests: Sequence[Request]) -> list[Problem]:
    """A check's name is the key of its pass rate and of thresholds: unique in the plan."""
    first: dict[str, str] = {}
    problems = []
    for i, request in enumerate(requests):
        for j, check in enumerate(request.checks):
            path = f"workload.requests[{i}].check[{j}]"
            if check.name in first:
                problems.append(Problem(f"{path}.name", f"'{check.name}' names {first[check.name]} too"))
            first.setdefault(check.name, path)
    return problems


# ---- the session and the model ----------------------------------------------------------


def _session_order_problems(requests: Sequence[Request], session: Session) -> list[Problem]:
    """A variable read before any request of the session (once, then steps) extracts it
    would be empty the first time: "a template that can never be filled"."""
    by_name = {r.name: (i, r) for i, r in enumerate(requests)}
    names = TemplateNames(variables=frozenset(variables(requests)))
    extracted: set[str] = set()
    problems: dict[tuple[str, str], Problem] = {}  # one per template and variable
    steps = [(f"once[{k}]", s) for k, s in enumerate(session.once)]
    steps += [(f"steps[{k}]", s) for k, s in enumerate(session.steps)]
    for where, step in steps:
        if step.request not in by_name:
            continue  # told as an unknown request
        i, request = by_name[step.request]
        # The request's own templates are filled before it is sent; its checks' after its
        # extractions ran on the response.
        for place, var in _step_reads(request, f"workload.requests[{i}]", names, extracted):
            if var not in extracted:
                problems.setdefault((place, var), _never_filled(place, var, where))
    return list(problems.values())


def _step_reads(request: Request, path: str, names: TemplateNames, extracted: set[str]) -> Iterator[tuple[str, str]]:
    """(place, variable) a step reads, in the order it reads them; adds its extractions to
    `extracted` between its request's templates and its checks'."""
    yield from _reads(_templates(request, path), names)
    extracted |= {e.var for e in request.extracts}
    for c, check in enumerate(request.checks):
        yield from _reads(_check_templates(check, f"{path}.check[{c}]"), names)


def _never_filled(place: str, var: str, where: str) -> Problem:
    return Problem(
        place,
        f"${{{var}}} is a template that can never be filled: the session reaches it at "
        f"workload.session.{where} before any request extracts {var} (order: once, then steps)",
    )


def _model_problems(requests: Sequence[Request], facts: JourneyFacts) -> list[Problem]:
    if facts.driver is Driver.GATLING:
        return _gatling_problems(requests, facts)
    if facts.has_users:
        return []
    problems = []
    if facts.cookies_given:
        problems.append(Problem("workload.cookies", f"{_NO_USERS}, so no cookie jar: give the workload a session"))
    names = TemplateNames(variables=frozenset(variables(requests)))
    for i, request in enumerate(requests):
        path = f"workload.requests[{i}]"
        if request.extracts:
            problems.append(Problem(f"{path}.extract", f"{_NO_USERS} to keep a value: give the workload a session"))
        reads = _reads(_templates(request, path), names)
        for j, check in enumerate(request.checks):
            reads += _reads(_check_templates(check, f"{path}.check[{j}]"), names)
            if check.on_fail is not OnFail.CONTINUE:
                why = f"{_NO_USERS} to {check.on_fail}: use continue"
                problems.append(Problem(f"{path}.check[{j}].on_fail", why))
        problems += [Problem(place, f"{_NO_USERS}: templates read built-ins only, not {var}") for place, var in reads]
    return problems


def _gatling_problems(requests: Sequence[Request], facts: JourneyFacts) -> list[Problem]:
    names = TemplateNames(variables=frozenset(variables(requests)))
    problems = []
    for i, request in enumerate(requests):
        path = f"workload.requests[{i}]"
        given = (("check", request.checks), ("extract", request.extracts))
        problems += [Problem(f"{path}.{key}", _GATLING) for key, journey in given if journey]
        if request.redirects:
            problems.append(Problem(f"{path}.redirects", _GATLING_REDIRECTS))
        if _templated(request, names):
            problems.append(Problem(path, _GATLING))
    if facts.session and facts.session.once:
        problems.append(Problem("workload.session.once", _GATLING))
    if facts.cookies_off:
        why = "the gatling driver keeps a cookie jar per user that cannot be turned off: use `driver: engine`"
        problems.append(Problem("workload.cookies", why))
    return problems
