"""Scenarios: independent populations in one plan, each with its own workload, load,
targets, start, duration and budget (docs/proposals/scenarios.md §2–§4).

A plan without `scenarios:` is one implicit scenario named `default` (`Plan.each_scenario`).
An agent runs every scenario of a step in one job (docs/proposals/scenarios.md §5).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from loadfleet.controller.model.errors import Problem
from loadfleet.controller.model.load import Load
from loadfleet.controller.plan.course import load_problems, sweep_problems
from loadfleet.controller.plan.journeys import Cookies
from loadfleet.controller.plan.workload import (
    Request,
    Session,
    Target,
    request_doc,
    request_from_doc,
    session_doc,
    session_from_doc,
)

# At most this many scenarios in one plan: each is a row set in every agent report and a
# task set on every engine reactor, so their number is bounded like rows (§8).
MAX_SCENARIOS = 16
DEFAULT_SCENARIO = "default"  # the implicit one; never written to outputs of a plain plan
# A safe CSV cell, Influx tag value and file name part; `*` is thereby reserved for totals.
SCENARIO_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,31}$")
# Top-level keys a scenario holds instead, and where they go.
_PER_SCENARIO_KEYS = ("workload", "load", "budget")


@dataclass(frozen=True)
class ScenarioTarget:
    name: str  # a plan target's name
    weight: int  # this scenario's weight for it (default: the plan target's)


@dataclass(frozen=True)
class Scenario:
    name: str
    requests: tuple[Request, ...]
    load: Load
    targets: tuple[ScenarioTarget, ...] = ()  # empty: every plan target, plan weights
    session: Session | None = None
    keep_alive: bool = True
    tls_verify: bool = False
    cookies: Cookies = Cookies()
    start_after_s: float = 0.0
    duration_s: float | None = None  # None: to the end of the run (or step)
    max_requests: int = 0  # the scenario's budget (0: none)
    implicit: bool = False  # the plan had no `scenarios:`

    def end_s(self, run_s: float) -> float:
        """When this scenario stops, in seconds from the run's (or step's) start."""
        return run_s if self.duration_s is None else self.start_after_s + self.duration_s

    def targets_of(self, plan_targets: tuple[Target, ...]) -> tuple[Target, ...]:
        """The plan targets this scenario sends to, with this scenario's weights."""
        if not self.targets:
            return plan_targets
        by_name = {t.name: t for t in plan_targets}
        return tuple(
            Target(by_name[st.name].url, st.weight, st.name, by_name[st.name].protocol, by_name[st.name].max_streams)
            for st in self.targets
        )

    def to_doc(self) -> dict[str, Any]:
        """The scenario in the plan's words (`scenarios[i]`), read back by `scenario_from_doc`."""
        workload: dict[str, Any] = {
            "keep_alive": self.keep_alive,
            "tls_verify": self.tls_verify,
            "requests": [request_doc(r) for r in self.requests],
        }
        if self.session:
            workload["session"] = session_doc(self.session)
        if self.cookies != Cookies():
            workload["cookies"] = self.cookies.to_doc()
        doc: dict[str, Any] = {"name": self.name, "workload": workload, "load": self.load.to_doc()}
        if self.targets:
            doc["targets"] = [{"name": t.name, "weight": t.weight} for t in self.targets]
        if self.start_after_s:
            doc["start_after_s"] = self.start_after_s
        if self.duration_s is not None:
            doc["duration_s"] = self.duration_s
        if self.max_requests:
            doc["budget"] = {"requests": self.max_requests}
        return doc


def scenarios_from_doc(doc: dict[str, Any]) -> tuple[Scenario, ...]:
    """The declared scenarios of a checked plan document (none for a plain plan)."""
    weights = {t["name"]: t.get("weight", 1) for t in doc["targets"] if "name" in t}
    return tuple(scenario_from_doc(s, weights) for s in doc.get("scenarios", []))


def scenario_from_doc(doc: dict[str, Any], plan_weights: dict[str, int]) -> Scenario:
    workload = doc["workload"]
    duration = doc.get("duration_s")
    return Scenario(
        name=doc["name"],
        requests=tuple(request_from_doc(r) for r in workload.get("requests", [])),
        load=Load.from_doc(doc["load"]),
        targets=tuple(_target(t, plan_weights) for t in doc.get("targets", [])),
        session=session_from_doc(workload.get("session")),
        keep_alive=workload.get("keep_alive", True),
        tls_verify=workload.get("tls_verify", False),
        cookies=Cookies.from_doc(workload.get("cookies")),
        start_after_s=float(doc.get("start_after_s", 0)),
        duration_s=None if duration is None else float(duration),
        max_requests=doc.get("budget", {}).get("requests", 0),
    )


def _target(doc: str | dict[str, Any], plan_weights: dict[str, int]) -> ScenarioTarget:
    if isinstance(doc, str):
        return ScenarioTarget(doc, plan_weights.get(doc, 1))
    return ScenarioTarget(doc["name"], doc.get("weight", plan_weights.get(doc["name"], 1)))


def scenario_problems(doc: dict[str, Any]) -> list[Problem]:
    """Every problem of a plan's `scenarios` (a schema-checked document), each with its path."""
    if "scenarios" not in doc:
        return []
    scenarios = doc["scenarios"]
    problems = [
        Problem(key, f"with scenarios, each scenario has its own {key}: move it to scenarios[i].{key}")
        for key in _PER_SCENARIO_KEYS
        if key in doc
    ]
    if not scenarios:
        return [*problems, Problem("scenarios", "give at least one scenario")]
    if len(scenarios) > MAX_SCENARIOS:
        problems.append(Problem("scenarios", f"{len(scenarios)} scenarios; at most {MAX_SCENARIOS}"))
    problems += _name_problems(scenarios)
    for i, scenario in enumerate(scenarios):
        problems += _one_scenario_problems(doc, scenario, f"scenarios[{i}]")
    return problems


def _name_problems(scenarios: list[dict[str, Any]]) -> list[Problem]:
    problems = []
    seen: dict[str, int] = {}
    for i, scenario in enumerate(scenarios):
        name = scenario["name"]
        if not SCENARIO_NAME.match(name):
            why = "a-z, 0-9, '_', '.', '-'; at most 32"
            problems.append(Problem(f"scenarios[{i}].name", f"{name[:40]!r} is not a scenario name ({why})"))
        elif name in seen:
            problems.append(Problem(f"scenarios[{i}].name", f"'{name}' is also scenarios[{seen[name]}].name"))
        seen.setdefault(name, i)
    return problems


def _one_scenario_problems(doc: dict[str, Any], scenario: dict[str, Any], path: str) -> list[Problem]:
    problems = _target_problems(doc["targets"], scenario.get("targets", []), path)
    swept = swept_index(doc)
    sweeping = swept is not None and doc["scenarios"][swept] is scenario
    problems += [Problem(f"{path}.{p.path}", p.message) for p in load_problems(scenario["load"], sweeping=sweeping)]
    problems += _workload_problems(scenario["workload"], f"{path}.workload")
    return problems + _timing_problems(doc, scenario, path)


def _target_problems(plan_targets: list[dict[str, Any]], picked: list[Any], path: str) -> list[Problem]:
    names = [t["name"] for t in plan_targets if "name" in t]
    weights = dict(zip(names, (t.get("weight", 1) for t in plan_targets if "name" in t), strict=True))
    problems = []
    if picked and len(names) < len(plan_targets):
        unnamed = next(i for i, t in enumerate(plan_targets) if "name" not in t)
        why = f"targets need names when a scenario picks some: targets[{unnamed}] has none"
        return [Problem(f"{path}.targets", why)]
    total = 0
    for j, target in enumerate(picked):
        name = target if isinstance(target, str) else target["name"]
        if name not in weights:
            problems.append(Problem(f"{path}.targets[{j}]", f"no target named {name!r} (targets: {', '.join(names)})"))
            continue
        total += weights[name] if isinstance(target, str) else target.get("weight", weights[name])
    if picked and not problems and total == 0:
        problems.append(Problem(f"{path}.targets", "every target of this scenario has weight 0"))
    return problems


def _workload_problems(workload: dict[str, Any], path: str) -> list[Problem]:
    """A scenario's requests and session; the plan-wide journey checks per scenario are S4's."""
    requests = workload.get("requests", [])
    if not requests:
        return [Problem(path, "give 'requests' (a scenario reads no manifest yet)")]
    problems = []
    if "feed" in workload:  # the ledger and row split are per plan, not yet per scenario (§9)
        problems.append(Problem(f"{path}.feed", "a data feed in a scenario is not supported yet (issue 31)"))
    if not any(r.get("weight", 1) > 0 for r in requests):
        problems.append(Problem(path, "at least one request needs a weight above 0"))
    names = {request_from_doc(r).name for r in requests}
    problems += [
        Problem(f"{path}.session.{part}[{i}].request", f"no request is named '{step['request']}'")
        for part in ("once", "steps")
        for i, step in enumerate(workload.get("session", {}).get(part, []))
        if step["request"] not in names
    ]
    return problems


def _timing_problems(doc: dict[str, Any], scenario: dict[str, Any], path: str) -> list[Problem]:
    timed = [key for key in ("start_after_s", "duration_s", "budget") if key in scenario]
    if "sweep" in doc:
        return [Problem(f"{path}.{key}", f"a sweep times every step: leave {key} out") for key in timed]
    start = scenario.get("start_after_s", 0)
    run_s = doc.get("duration_s", 0)
    if "duration_s" in scenario and start + scenario["duration_s"] > run_s:
        why = f"starts at {start:g} s and runs {scenario['duration_s']:g} s: ends after the run's {run_s:g} s"
        return [Problem(f"{path}.duration_s", why)]
    if start >= run_s > 0:
        return [Problem(f"{path}.start_after_s", f"starts at {start:g} s, not before the run's end at {run_s:g} s")]
    return []


def swept_index(doc: dict[str, Any]) -> int | None:
    """The place in `scenarios` of the scenario the plan's sweep steps: the one `sweep.scenario`
    names, or the plan's only one; None without a sweep or when that names none."""
    if "sweep" not in doc:
        return None
    names = [s["name"] for s in doc.get("scenarios", [])]
    name = doc["sweep"].get("scenario", names[0] if len(names) == 1 else None)
    return names.index(name) if name in names else None


def course_problems_of_scenarios(doc: dict[str, Any]) -> list[Problem]:
    """The duration or sweep of a plan with scenarios, checked as course.py checks a plain
    plan's, the sweep against its swept scenario's load; and every scenario keeps a target
    among each step's first `sweep.servers` targets."""
    swept = swept_index(doc)
    if "sweep" in doc and swept is None:
        return []  # reference_problems names the scenario to sweep
    load = doc["scenarios"][swept]["load"] if swept is not None else {"model": "closed"}
    prefix = f"scenarios[{swept}]."
    problems = [
        Problem(prefix + p.path if p.path.startswith("load") else p.path, p.message)
        for p in sweep_problems({**doc, "load": load})
    ]
    return problems + _servers_problems(doc)


def _servers_problems(doc: dict[str, Any]) -> list[Problem]:
    problems = []
    for i, k in enumerate(doc.get("sweep", {}).get("servers", [])):
        names = {t.get("name") for t in doc["targets"][:k]}
        for scenario in doc["scenarios"]:
            picked = [t if isinstance(t, str) else t["name"] for t in scenario.get("targets", [])]
            if picked and not names.intersection(picked):
                why = f"scenario {scenario['name']} has no target among the first {k} target(s) of this step"
                problems.append(Problem(f"sweep.servers[{i}]", why))
    return problems


def reference_problems(doc: dict[str, Any]) -> list[Problem]:
    """`scenario` in the sweep, the stop conditions and the thresholds names a declared
    scenario (a plain plan has none to name); a sweep over several scenarios names one."""
    scenarios = {s["name"]: s for s in doc.get("scenarios", [])}
    refs = [("sweep.scenario", doc.get("sweep", {}))]
    refs += [(f"stop.{kind}.scenario", cond) for kind, cond in doc.get("stop", {}).items()]
    refs += [(f"thresholds[{i}].scenario", t) for i, t in enumerate(doc.get("thresholds", []))]
    problems = [
        Problem(path, _unknown(holder["scenario"], sorted(scenarios)))
        for path, holder in refs
        if "scenario" in holder and holder["scenario"] not in scenarios
    ]
    sweep = doc.get("sweep", {})
    if "sweep" in doc and len(scenarios) > 1 and "scenario" not in sweep:
        why = f"the plan has {len(scenarios)} scenarios: name the one the sweep steps ({', '.join(scenarios)})"
        problems.append(Problem("sweep.scenario", why))
    for i, threshold in enumerate(doc.get("thresholds", [])):
        scenario = scenarios.get(threshold.get("scenario", ""))
        if scenario and "request" in threshold:
            names = [request_from_doc(r).name for r in scenario["workload"].get("requests", [])]
            if threshold["request"] not in names:
                why = f"scenario {scenario['name']} has no request {threshold['request']!r} ({', '.join(names)})"
                problems.append(Problem(f"thresholds[{i}].request", why))
    return problems


def _unknown(name: str, known: list[str]) -> str:
    if not known:
        return f"no scenario named {name!r}: the plan has no scenarios (leave scenario out)"
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"scenarios: {', '.join(known)}"
    return f"no scenario named {name!r} ({hint})"
