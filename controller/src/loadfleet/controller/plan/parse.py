"""Plans: YAML text -> a validated, frozen `Plan`.

Validation reports every problem at once, each with its path in the plan (`targets[1].weight`),
and never changes anything. Structure is checked against the published JSON Schema (schema.py,
`plan.schema.json`), meaning (URLs, weights, the manifest) by the checks below, how the plan runs
(load model, sweep, driver) by course.py, its journeys by journeycheck.py, its data file by feeds.py.
A manifest, a data file and body files (bodyfiles.py) are read here, where they are, and sent
inline: a resolved plan is self-contained; the controller's own check of it runs here too.

Plans are untrusted input: the YAML is read by `yamlsafe` (size, encoding, depth,
aliases, duplicate keys, non-finite numbers), every number has a maximum that fits its
wire type, and a confined plan (`parse_plan`'s default: what the controller receives)
names no file at all. Only `load_plan`, on the machine that holds the plan file, reads
the files a plan names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from loadfleet.controller.model.driver import DEFAULT_DRIVER, Driver
from loadfleet.controller.model.errors import PlanError, Problem
from loadfleet.controller.model.load import IDLE_LOAD, Load, LoadModel
from loadfleet.controller.plan import manifest as planfiles
from loadfleet.controller.plan import yamlsafe
from loadfleet.controller.plan.bodyfiles import inline_body_files
from loadfleet.controller.plan.course import course_problems, driver_problems, resolve
from loadfleet.controller.plan.feeds import Feed, plan_feed
from loadfleet.controller.plan.journeycheck import JourneyFacts, check_names, extract_sources_problem, journey_problems
from loadfleet.controller.plan.journeys import Cookies
from loadfleet.controller.plan.model import (
    DEFAULT_AGENT_WAIT_S,
    DEFAULT_CONNECT_TIMEOUT_MS,
    DEFAULT_REQUEST_TIMEOUT_MS,
    AgentSelection,
    GatlingOptions,
    InfluxTarget,
    LossPolicy,
    Plan,
    Request,
    Target,
)
from loadfleet.controller.plan.protocol import protocol_problems
from loadfleet.controller.plan.scenarios import (
    course_problems_of_scenarios,
    reference_problems,
    scenario_problems,
    scenarios_from_doc,
)
from loadfleet.controller.plan.schema import plan_schema as plan_schema  # re-exported: the CLI and tests read it here
from loadfleet.controller.plan.schema import schema_problems
from loadfleet.controller.plan.shorthand import add_cli_thresholds, cli_threshold_problem
from loadfleet.controller.plan.stops import StopConditions
from loadfleet.controller.plan.sweep import Sweep
from loadfleet.controller.plan.targettls import inline_tls_files
from loadfleet.controller.plan.targeturls import replace_target_urls, short
from loadfleet.controller.plan.thresholds import PlanFacts, threshold_from_doc, threshold_problems, verdict_from_doc
from loadfleet.controller.plan.workload import request_from_doc, session_from_doc
from loadfleet.wire import DEFAULT_INTERVAL_MS
from loadfleet.wire.allowlist import ipv4_form_problem


def load_plan(path: Path, target_urls: Mapping[str, str] | None = None, thresholds: Sequence[str] = ()) -> Plan:
    """Reads and validates a plan file on this machine: the files it names (a workload
    manifest, relative to the plan file) are read here and the result is self-contained.
    `target_urls`: new urls for named targets (`loadfleet run --target NAME=URL`);
    `thresholds`: more thresholds in the CLI's shorthand (`--threshold 'p99_ms<250'`)."""
    try:
        with path.open("rb") as f:
            data = f.read(yamlsafe.MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise PlanError([Problem("", f"cannot read {path}: {exc.strerror}")]) from exc
    try:
        text = yamlsafe.decode(data)
    except yamlsafe.YamlProblem as exc:
        raise PlanError([Problem(exc.path, exc.message)]) from None
    return parse_plan(
        text,
        base_dir=path.parent,
        default_name=path.stem,
        confined=False,
        target_urls=target_urls,
        thresholds=thresholds,
    )


def _check_as_sent(plan: Plan, *, inline_requests: int) -> None:
    """Raises PlanError with what the controller would refuse in the plan `loadfleet run`
    sends it (a manifest's requests inline, the file's name as the plan's): by the
    controller's own check, `parse_plan` of `to_yaml()`, so `validate` and the controller
    agree. A problem of a manifest's request is named by its place in the manifest."""
    try:
        parse_plan(plan.to_yaml())
    except PlanError as exc:
        from_manifest = len(plan.requests) - inline_requests
        raise PlanError([_as_sent_problem(p, inline_requests, from_manifest) for p in exc.problems]) from None


_RESOLVED_REQUEST = re.compile(r"^workload\.requests\[(\d+)\](\.name)?(.*)$")


def _as_sent_problem(problem: Problem, inline_requests: int, from_manifest: int) -> Problem:
    match = _RESOLVED_REQUEST.match(problem.path)
    if match and int(match[1]) >= inline_requests:
        field = ".class" if match[2] else match[3]
        return Problem("workload.manifest", f"files[{int(match[1]) - inline_requests}]{field}: {problem.message}")
    if from_manifest and problem.path in ("", "workload.requests"):  # the whole: its size, its count
        return Problem("workload.manifest", f"the plan with its {from_manifest:,} requests inline: {problem.message}")
    return Problem(problem.path, f"{problem.message} (in the resolved plan `loadfleet run` sends the controller)")


def parse_plan(
    text: str,
    *,
    base_dir: Path | None = None,
    default_name: str = "plan",
    confined: bool = True,
    target_urls: Mapping[str, str] | None = None,
    thresholds: Sequence[str] = (),
) -> Plan:
    """Validates a plan. `confined` (the default, and the controller's only mode): the plan
    may name no file (a manifest, a relative Gatling project) since nothing is read on its
    behalf; `loadfleet run` resolves those where the plan file is and sends them inline.
    `thresholds` (`--threshold`, shorthand.py) are appended to the plan's own before it is
    checked, so they meet the same checks; their problems are named `--threshold[N]`.
    `runnable_only` False (tests only): a good plan with `scenarios:` is not refused."""
    try:
        doc = yamlsafe.load(text)
    except yamlsafe.YamlProblem as exc:
        raise PlanError([Problem(exc.path, exc.message)]) from None
    if not isinstance(doc, dict):
        raise PlanError([Problem("", "a plan must be a YAML mapping")])
    if not thresholds:
        return _parse_doc(doc, base_dir, default_name, confined, target_urls)
    own = add_cli_thresholds(doc, thresholds)
    try:
        return _parse_doc(doc, base_dir, default_name, confined, target_urls)
    except PlanError as exc:
        raise PlanError([cli_threshold_problem(p, own) for p in exc.problems]) from None


def _parse_doc(
    doc: dict[str, Any],
    base_dir: Path | None,
    default_name: str,
    confined: bool,
    target_urls: Mapping[str, str] | None,
) -> Plan:
    problems = schema_problems(doc)
    if problems:
        raise PlanError(_capped(problems))
    problems = replace_target_urls(doc, target_urls or {})
    if problems:
        raise PlanError(problems)
    if "scenarios" in doc:
        problems = inline_tls_files(doc, base_dir, confined=confined) + _scenario_plan_problems(doc, base_dir, confined)
        problems = (_confinement_problems(doc) if confined else []) + problems
        if problems:
            raise PlanError(_capped(problems))
        plan = _build(doc, [], default_name, base_dir, None)
        if not confined:
            _check_as_sent(plan, inline_requests=0)
        return plan
    feed, problems = plan_feed(doc, base_dir, confined=confined)  # first: templates read its columns
    problems += inline_body_files(doc, base_dir, confined=confined)
    problems += inline_tls_files(doc, base_dir, confined=confined)
    problems = (_confinement_problems(doc) if confined else []) + problems
    if problems:
        raise PlanError(_capped(problems))
    problems, requests = _meaning_problems(doc, base_dir, feed)
    if problems:
        raise PlanError(_capped(problems))
    plan = _build(doc, requests, default_name, base_dir, feed)
    if not confined:
        _check_as_sent(plan, inline_requests=len(doc.get("workload", {}).get("requests", [])))
    return plan


def _scenario_plan_problems(doc: dict[str, Any], base_dir: Path | None, confined: bool) -> list[Problem]:
    problems = _target_problems(doc["targets"]) + protocol_problems(doc) + scenario_problems(doc)
    for i, scenario in enumerate(doc["scenarios"]):  # each one's body files and journey, as a plain plan's
        as_plan = {
            "workload": scenario["workload"],
            "load": scenario["load"],
            "driver": doc.get("driver", DEFAULT_DRIVER),
        }
        found = inline_body_files(as_plan, base_dir, confined=confined)
        if not found:
            requests = [request_from_doc(r) for r in scenario["workload"].get("requests", [])]
            found = _journey_problems(as_plan, requests, None)
        problems += [Problem(f"scenarios[{i}].{p.path}", p.message) for p in found]
    references = reference_problems(doc)
    requests = [request_from_doc(r) for s in doc["scenarios"] for r in s["workload"].get("requests", [])]
    facts = replace(_plan_facts(doc, requests), requests_known=True)
    named = {p.path for p in references}  # a request not in its scenario: said there once
    own = [p for p in threshold_problems(doc.get("thresholds", []), facts) if p.path not in named]
    return problems + course_problems_of_scenarios(doc) + references + own + driver_problems(doc)


def _confinement_problems(doc: dict[str, Any]) -> list[Problem]:
    """What a confined plan may not do: make its reader open files."""
    problems = []
    if "manifest" in doc.get("workload", {}):
        why = "the controller reads no files named by a plan: `loadfleet run` reads the manifest and sends its requests"
        problems.append(Problem("workload.manifest", why + " inline"))
    project = doc.get("gatling", {}).get("project")
    if project is not None and not Path(project).is_absolute():
        problems.append(
            Problem(
                "gatling.project",
                f"'{project}' is relative: give the project's absolute path on "
                "the agents' hosts (`loadfleet run` makes it absolute)",
            )
        )
    return problems


# More problems than this are summed up in one line: a plan of 10,000 bad requests is one mistake.
MAX_PROBLEMS = 50


def _capped(problems: list[Problem]) -> list[Problem]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    return [*problems[:MAX_PROBLEMS], Problem("", f"... and {len(problems) - MAX_PROBLEMS} more problems")]


def _meaning_problems(
    doc: dict[str, Any], base_dir: Path | None, feed: Feed | None
) -> tuple[list[Problem], list[Request]]:
    problems = _target_problems(doc["targets"]) + protocol_problems(doc)
    workload = doc.get("workload", {})  # absent only when a Gatling project defines it
    requests = [request_from_doc(r) for r in workload.get("requests", [])]
    if "manifest" in workload:
        try:
            requests += [request_from_doc(r) for r in planfiles.read_manifest(resolve(workload["manifest"], base_dir))]
        except planfiles.FileProblems as exc:
            problems += [Problem("workload.manifest", message) for message in exc.messages]
    elif "requests" not in workload and "workload" in doc:
        problems.append(Problem("workload", "give 'requests' or a 'manifest'"))
    if requests and not any(r.weight > 0 for r in requests):
        problems.append(Problem("workload", "at least one request needs a weight above 0"))

    problems += course_problems(doc, base_dir)
    problems += threshold_problems(doc.get("thresholds", []), _plan_facts(doc, requests)) + reference_problems(doc)
    session = workload.get("session")
    if session:
        problems += _session_problems(doc, session, requests)
    return problems + _journey_problems(doc, requests, feed), requests


def _journey_problems(doc: dict[str, Any], requests: list[Request], feed: Feed | None) -> list[Problem]:
    """Checks, extractions, templates and `once` (journeycheck.py)."""
    workload = doc.get("workload", {})
    shapes = [
        problem
        for i, r in enumerate(workload.get("requests", []))
        for j, e in enumerate(r.get("extract", []))
        if (problem := extract_sources_problem(e, f"workload.requests[{i}].extract[{j}]"))
    ]
    facts = JourneyFacts(
        model=LoadModel(doc["load"]["model"]),
        driver=Driver(doc.get("driver", DEFAULT_DRIVER)),
        session=session_from_doc(workload.get("session")),
        cookies_given=isinstance(workload.get("cookies"), dict),
        data=((feed.name, feed.columns),) if feed else (),
    )
    return shapes + journey_problems(requests, facts)


def _plan_facts(doc: dict[str, Any], requests: list[Request]) -> PlanFacts:
    """What the plan's thresholds may name: its checks are its requests' checks and extractions."""
    return PlanFacts(
        targets=frozenset(t["name"] for t in doc["targets"] if "name" in t),
        requests=frozenset(r.name for r in requests),
        checks=check_names(requests),
        interval_s=doc.get("interval_ms", DEFAULT_INTERVAL_MS) / 1000,
        swept="sweep" in doc,
        requests_known="workload" in doc,  # else a Gatling project's simulation names them
    )


def _target_problems(targets: list[dict[str, Any]]) -> list[Problem]:
    problems = [
        Problem(f"targets[{i}].url", problem)
        for i, target in enumerate(targets)
        if (problem := _url_problem(target["url"]))
    ]
    if not any(t.get("weight", 1) > 0 for t in targets):
        problems.append(Problem("targets", "at least one target needs a weight above 0"))
    return problems


def _session_problems(doc: dict[str, Any], session: dict[str, Any], requests: list[Request]) -> list[Problem]:
    """Each step names a request of the workload; a session's users arrive open only in the engine."""
    names = {r.name for r in requests}
    problems = [
        Problem(f"workload.session.{part}[{i}].request", f"no request is named '{step['request']}'")
        for part in ("once", "steps")
        for i, step in enumerate(session.get(part, []))
        if step["request"] not in names
    ]
    if doc["load"]["model"] == "open" and doc.get("driver", DEFAULT_DRIVER) == Driver.GATLING:
        problems.append(
            Problem("workload.session", "arriving users who walk a session (open model) need the engine driver")
        )
    return problems


def _url_problem(url: str) -> str | None:
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        # urlsplit drops tabs and newlines silently; the engine would get them.
        return f"{short(repr(url))} has spaces or control characters"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"'{url}' must start with http:// or https://"
    if not parts.hostname:
        return f"'{url}' has no host"
    # The agents refuse it too; here the user hears of it before any run starts.
    ipv4_problem = ipv4_form_problem(parts.hostname)
    if ipv4_problem:
        return ipv4_problem
    if parts.username is not None or parts.password is not None:
        return f"'{short(url.split('@')[-1])}': credentials in a URL are not sent; give an Authorization header"
    try:
        _ = parts.port  # urllib checks the port only when asked for it
    except ValueError:
        return f"'{url}' has an invalid port"
    if parts.path not in ("", "/") or parts.query:
        return f"'{url}' must be a base URL without a path (paths belong to workload.requests)"
    return None


def _build(doc: dict[str, Any], requests: list[Request], name: str, base_dir: Path | None, feed: Feed | None) -> Plan:
    load = doc.get("load")
    timeouts = doc.get("timeouts", {})
    agents = doc.get("agents", {})
    influx = doc.get("sinks", {}).get("influxdb")
    sweep = Sweep.from_doc(doc.get("sweep"))
    return Plan(
        name=doc.get("name", name),
        duration_s=sweep.step_s * sweep.total_steps if sweep else float(doc["duration_s"]),
        interval_ms=doc.get("interval_ms", DEFAULT_INTERVAL_MS),
        targets=tuple(Target.from_doc(t) for t in doc["targets"]),
        requests=tuple(requests),
        keep_alive=doc.get("workload", {}).get("keep_alive", True),
        tls_verify=doc.get("workload", {}).get("tls_verify", False),
        load=Load.from_doc(load) if load else IDLE_LOAD,  # none: each scenario has its own
        session=session_from_doc(doc.get("workload", {}).get("session")),
        max_requests=doc.get("budget", {}).get("requests", 0),
        connect_timeout_ms=timeouts.get("connect_ms", DEFAULT_CONNECT_TIMEOUT_MS),
        request_timeout_ms=timeouts.get("request_ms", DEFAULT_REQUEST_TIMEOUT_MS),
        agents=AgentSelection(
            count=agents.get("count"),
            labels=tuple(sorted(agents.get("labels", {}).items())),
            wait_s=float(agents.get("wait_s", DEFAULT_AGENT_WAIT_S)),
            lease_s=float(agents.get("lease_s", 0)),
            on_loss=LossPolicy(agents.get("on_loss", LossPolicy.REDISTRIBUTE)),
        ),
        influxdb=InfluxTarget(**influx) if influx else None,
        sweep=sweep,
        warmup_s=float(doc.get("warmup_s", 0)),
        stop=StopConditions.from_doc(doc.get("stop")),
        driver=Driver(doc.get("driver", DEFAULT_DRIVER)),
        gatling=_gatling(doc.get("gatling"), base_dir),
        thresholds=tuple(threshold_from_doc(t) for t in doc.get("thresholds", [])),
        verdict=verdict_from_doc(doc.get("verdict")),
        cookies=Cookies.from_doc(doc.get("workload", {}).get("cookies")),
        feed=feed,
        scenarios=scenarios_from_doc(doc),
    )


def _gatling(doc: dict[str, Any] | None, base_dir: Path | None) -> GatlingOptions | None:
    if doc is None:
        return None
    project = ""
    if "project" in doc:  # absolute where the plan file is read, so agents find it from anywhere
        path = resolve(doc["project"], base_dir)
        project = str(path.absolute() if base_dir is not None else path)
    return GatlingOptions(
        project=project, simulation=doc.get("simulation", ""), html_report=doc.get("html_report", False)
    )
