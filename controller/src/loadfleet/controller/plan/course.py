"""How a plan runs, checked: its load model, its sweep (or duration and warm-up), and its
driver (the engine or a Gatling project). Each check takes the plan document, already valid
against the schema (planschema.py), and returns every problem with its path in the plan;
plan.py runs them with the checks of targets and workload and builds the Plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadfleet.controller.model.driver import DEFAULT_DRIVER, Driver
from loadfleet.controller.model.errors import Problem
from loadfleet.wire import DEFAULT_INTERVAL_MS


def course_problems(doc: dict[str, Any], base_dir: Path | None) -> list[Problem]:
    """Everything about the plan's course: load, sweep or duration, driver, Gatling."""
    return (
        load_problems(doc["load"], sweeping="sweep" in doc)
        + sweep_problems(doc)
        + driver_problems(doc)
        + gatling_problems(doc, base_dir)
    )


# A run is a job per sweep step, each with its own barrier and files: bounded in number and time.
MAX_SWEEP_STEPS = 10_000
MAX_RUN_S = 7 * 86400

# What each model needs, and what it cannot have.
_MODEL_NEEDS = {"closed": ("clients",), "open": ("rate",), "users": ("users", "spawn_rate")}
_MODEL_ONLY = {
    "clients": "closed",
    "rate": "open",
    "poisson": "open",
    "max_connections": "open",
    "users": "users",
    "spawn_rate": "users",
}


def load_problems(load: dict[str, Any], *, sweeping: bool = False) -> list[Problem]:
    model = load["model"]
    level = SWEEP_LEVEL[model]
    problems = [
        Problem(f"load.{key}", f"the {model} model needs '{key}'")
        for key in _MODEL_NEEDS[model]
        if key not in load and not (sweeping and key in (level, "spawn_rate"))
    ]  # a sweep's: sweep_problems
    if sweeping and level in load:
        problems.append(Problem(f"load.{level}", f"sweep.steps sets the {level} of each step; leave '{level}' out"))
    problems += [
        Problem(f"load.{key}", f"'{key}' belongs to the {owner} model, not {model}")
        for key, owner in _MODEL_ONLY.items()
        if key in load and owner != model
    ]
    level_key = {"closed": "clients", "open": "rate"}.get(model)
    if level_key and load.get(level_key) == 0 and not any(s["target"] > 0 for s in load.get("stages", [])):
        problems.append(
            Problem(f"load.{level_key}", f"{level_key} is 0 and no stage raises it: there would be no load")
        )
    if model == "open" and ("think" in load or "think_time_ms" in load):
        problems.append(Problem("load.think", "the open model has no think time (requests come at the rate)"))
    if "stages" in load and model == "users":
        problems.append(Problem("load.stages", "users grow by their spawn_rate; stages ramp closed or open loads"))
    think = load.get("think", {})
    if "uniform_ms" in think and think["uniform_ms"][0] > think["uniform_ms"][1]:
        problems.append(Problem("load.think.uniform_ms", "the minimum is above the maximum"))
    return problems


# What a sweep's steps set, by model.
SWEEP_LEVEL = {"closed": "clients", "open": "rate", "users": "users"}


def driver_problems(doc: dict[str, Any]) -> list[Problem]:
    """What the Gatling driver cannot run (docs/gatling.md), in the plan or in each scenario."""
    if doc.get("driver", DEFAULT_DRIVER) != Driver.GATLING:
        return []
    problems = [_refused("sweep", "sweeps (each step would start a JVM)")] if "sweep" in doc else []
    if "scenarios" not in doc:
        return _course_refusals(doc, "") + problems
    if "project" in doc.get("gatling", {}):
        why = (
            "a Gatling project's simulation sets its own populations; scenarios need loadfleet's "
            "JobSimulation (leave gatling.project out)"
        )
        problems.append(Problem("gatling.project", why))
    for i, scenario in enumerate(doc["scenarios"]):
        problems += _course_refusals(scenario, f"scenarios[{i}].")
        if scenario["load"]["model"] == "open" and "session" in scenario["workload"]:
            why = "arriving users who walk a session (open model) need the engine driver"
            problems.append(Problem(f"scenarios[{i}].workload.session", why))
    return problems


def _course_refusals(part: dict[str, Any], prefix: str) -> list[Problem]:
    """Stages and budgets of a plan without scenarios, or of one scenario (`prefix`)."""
    unsupported = [
        ("load.stages", "stages" in part.get("load", {}), "stages"),
        ("budget", "budget" in part, "request budgets"),
    ]
    return [_refused(f"{prefix}{path}", what) for path, present, what in unsupported if present]


def _refused(path: str, what: str) -> Problem:
    return Problem(path, f"the gatling driver does not run {what}; use driver: engine")


def gatling_problems(doc: dict[str, Any], base_dir: Path | None) -> list[Problem]:
    """The gatling block: for the gatling driver; a project and its simulation go together and
    replace the workload. The project is checked only where the plan file is read (base_dir):
    a controller elsewhere cannot see it, agents check it on their host."""
    block = doc.get("gatling")
    if block is None:
        return []
    if doc.get("driver", DEFAULT_DRIVER) != Driver.GATLING:
        return [Problem("gatling", "gatling options need driver: gatling")]
    problems = []
    if "project" in block and "simulation" not in block:
        problems.append(Problem("gatling.simulation", "give the simulation class to run from the project"))
    if "simulation" in block and "project" not in block:
        problems.append(Problem("gatling.project", "give the Gatling Maven project the simulation is in"))
    if "project" in block:
        if "workload" in doc:
            problems.append(Problem("workload", "the Gatling project's simulation defines the workload; leave it out"))
        project = resolve(block["project"], base_dir)
        if base_dir is not None and not (project / "pom.xml").is_file():
            problems.append(Problem("gatling.project", f"{project} is not a Maven project (no pom.xml)"))
    return problems


def warmup_problems(doc: dict[str, Any]) -> list[Problem]:
    """A plain plan's warm-up must leave at least one interval of load to measure."""
    warmup_s, interval_s = doc.get("warmup_s", 0), doc.get("interval_ms", DEFAULT_INTERVAL_MS) / 1000
    if warmup_s and doc["duration_s"] - warmup_s < interval_s:
        return [
            Problem(
                "warmup_s",
                f"a warm-up of {warmup_s:g} s leaves less than one interval of {interval_s:g} s "
                f"of the {doc['duration_s']:g} s of load to measure",
            )
        ]
    return []


def sweep_problems(doc: dict[str, Any]) -> list[Problem]:
    """duration_s xor sweep; steps that fit the model; server counts that fit the targets."""
    sweep = doc.get("sweep")
    if sweep is None:
        return (
            warmup_problems(doc)
            if "duration_s" in doc
            else [Problem("duration_s", "give duration_s, or a sweep with step_s")]
        )
    problems = []
    if "warmup_s" in doc:
        problems.append(Problem("warmup_s", "a sweep warms each step up: give sweep.warmup_s"))
    if "duration_s" in doc:
        problems.append(Problem("duration_s", "a sweep runs each step for sweep.step_s; leave duration_s out"))
    problems += _level_problems(doc["load"], sweep) + _length_problems(doc, sweep) + _server_problems(doc, sweep)
    if "stages" in doc["load"]:
        problems.append(Problem("load.stages", "a sweep sets each step's level; stages do not combine with it"))
    if "budget" in doc:
        problems.append(Problem("budget", "a request budget does not combine with a sweep (steps are timed)"))
    return problems


def _level_problems(load: dict[str, Any], sweep: dict[str, Any]) -> list[Problem]:
    """The steps' levels fit the load model: whole numbers of clients or users, a spawn rate."""
    problems = []
    model = load["model"]
    pairs = [i for i, v in enumerate(sweep["steps"]) if isinstance(v, list)]
    if pairs and model != "users":
        problems.append(Problem(f"sweep.steps[{pairs[0]}]", "a [users, spawn_rate] step goes with the users model"))
    levels = [v[0] if isinstance(v, list) else v for v in sweep["steps"]]
    if model != "open":
        problems += [
            Problem(f"sweep.steps[{i}]", f"{v} is not a whole number of {SWEEP_LEVEL[model]}")
            for i, v in enumerate(levels)
            if float(v) != int(v)
        ]
    if model == "users" and "spawn_rate" not in load and len(pairs) < len(levels):
        problems.append(
            Problem("load.spawn_rate", "the users model needs 'spawn_rate' (or every step as [users, spawn_rate])")
        )
    return problems


def _length_problems(doc: dict[str, Any], sweep: dict[str, Any]) -> list[Problem]:
    """A step measures at least one interval; the sweep is bounded in steps and in time."""
    problems = []
    interval_s = doc.get("interval_ms", DEFAULT_INTERVAL_MS) / 1000
    if sweep["step_s"] - sweep.get("warmup_s", 0) < 2 * interval_s:
        problems.append(
            Problem(
                "sweep.step_s",
                f"{sweep['step_s']:g} s less a warm-up of {sweep.get('warmup_s', 0):g} s "
                f"leaves less than 2 intervals of {interval_s:g} s (a step's final interval is "
                "not measured)",
            )
        )
    total = len(sweep["steps"]) * sweep.get("repeat", 1) * max(1, len(sweep.get("servers", [])))
    if total > MAX_SWEEP_STEPS:
        problems.append(Problem("sweep", f"{total:,} steps (levels x repeat x servers); at most {MAX_SWEEP_STEPS:,}"))
    elif total * sweep["step_s"] > MAX_RUN_S:
        problems.append(
            Problem("sweep.step_s", f"{total} steps of {sweep['step_s']:g} s run longer than {MAX_RUN_S // 86400} days")
        )
    return problems


def _server_problems(doc: dict[str, Any], sweep: dict[str, Any]) -> list[Problem]:
    """Each server count of the sweep names targets the plan has, not all of weight 0."""
    problems = []
    n_targets = len(doc["targets"])
    for i, k in enumerate(sweep.get("servers", [])):
        if k > n_targets:
            problems.append(Problem(f"sweep.servers[{i}]", f"{k} servers, but the plan has {n_targets} target(s)"))
        elif not any(t.get("weight", 1) > 0 for t in doc["targets"][:k]):
            problems.append(Problem(f"sweep.servers[{i}]", f"the first {k} target(s) all have weight 0"))
    return problems


def resolve(path: str, base_dir: Path | None) -> Path:
    """A path the plan names, relative to the plan file's directory (when it is known)."""
    p = Path(path)
    return p if p.is_absolute() or base_dir is None else base_dir / p
