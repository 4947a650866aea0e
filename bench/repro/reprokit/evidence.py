"""Stored evidence: docs/reproductions/<study>/<run-id>/ holds one run's small files and what
placed it in the study.

    summary.json           the run's summary, as loadfleet wrote it
    steps.csv              its steps
    plan.yaml              the plan as it ran (levels and step lengths of this reproduction)
    cluster_intervals.csv  its cluster totals per interval (intervals.py); runs stored before
                           these were kept have none
    cell.json              {study, cell, vars, pass, level_vars, levels, step_vars, plan, targets,
                            lab_specs, command, generator_cpus, started_utc, loadavg_1m,
                            idle_pct_before, servers_before, restart, exit_code, paper_s_per_run_s}
                           restart: {restarted, labs: [{state_dir, started_utc, seconds, servers:
                           [{name, kind, old_pids, new_pids}]}], kept_warm_because} (restarts.py);
                           runs stored before restarts were kept have none

`read_observations` turns every step of every stored run into an `Observation`: the cell's
variables, plus the step's level (`levels[level_index - 1]`, e.g. {users: 4000, spawn_rate: 800})
and the step fields named by `step_vars` (e.g. {"cpus": "servers"}); and, for a run stored with
its intervals, every interval and the run itself (intervals.py). A step's observation says why
its figures are not used (`left_out`: failed in its window; `invalid`: loadfleet marked it so;
`fails_cell`: it measured nothing under load), and its `error_pct` counts the failures after its
window (late.py). A run with a request budget and no sweep (study 000's thread groups) is observed
whole instead, from its totals (`whole_run_observation`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .intervals import keep_cluster_intervals, read_interval_rows, read_plan, read_time_observations
from .late import Late, late_failures, strict_error_pct
from .observation import Observation

STORED_FILES = ("summary.json", "steps.csv", "plan.yaml")
CELL_FILE = "cell.json"
FIGURES = (
    "mean_ms",
    "stddev_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "error_pct",
    "ok_rps",
    "achieved_rps",
    "bytes_per_s",
    "concurrent_conns",
    "new_conns_per_s",
)
USABLE_STEP_STATES = ("finished", "stopped")


class EvidenceError(Exception):
    """A stored run that cannot be read (a file missing or malformed)."""


def store_run(run_dir: Path, study_dir: Path, cell_record: dict, named_run_dir: str = "") -> Path:
    """Copies the run's small files and writes its cell.json; returns the stored directory.
    `named_run_dir`: the summary's run_dir as the evidence names it (relative to the repository,
    for a run a lab's controller wrote under an absolute path)."""
    target = study_dir / Path(run_dir).name
    target.mkdir(parents=True, exist_ok=True)
    for name in STORED_FILES:
        if (Path(run_dir) / name).exists():
            shutil.copyfile(Path(run_dir) / name, target / name)
    summary_path = target / "summary.json"
    if named_run_dir and summary_path.exists():
        summary = json.loads(summary_path.read_text())
        if summary.get("run_dir") != named_run_dir:  # a --local run names it so already: kept as written
            summary["run_dir"] = named_run_dir
            summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    keep_cluster_intervals(Path(run_dir), target)
    (target / CELL_FILE).write_text(json.dumps(cell_record, indent=1, sort_keys=True) + "\n")
    return target


def stored_run_dirs(study_dir: Path) -> list[Path]:
    """The directory of every stored run of a study, oldest first (run ids sort by time)."""
    return [cell_file.parent for cell_file in sorted(Path(study_dir).glob(f"*/{CELL_FILE}"))]


def _read_run(run_dir: Path) -> tuple[dict, dict]:
    try:
        return json.loads((run_dir / CELL_FILE).read_text()), json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"{run_dir}: {exc}") from exc


def stored_runs(study_dir: Path) -> list[tuple[dict, dict]]:
    """(cell record, summary) of every stored run of a study, oldest first."""
    return [_read_run(run_dir) for run_dir in stored_run_dirs(study_dir)]


def lost_after_window(step: dict, losses: list[dict]) -> bool:
    """True when every engine lost in the step was lost after its measured intervals had ended (e.g.
    killed as silent while draining slow requests at the step's end): its figures are whole."""
    mine = [loss for loss in losses if loss.get("step") == step.get("name")]
    window_end_ms = (step.get("start_ms") or 0) + 1000 * float(step.get("measured_s") or 0)
    return bool(mine) and step.get("intervals", 0) > 0 and all(loss.get("at_ms", 0) >= window_end_ms for loss in mine)


def left_out_reason(step: dict, losses: list[dict] = ()) -> str:
    """Why a step's figures are not used: it failed during its measured intervals (e.g. an engine
    lost in the middle of them, so its load was not what the level says), or it measured nothing
    with no load offered (its figures would read as 0). A step that failed only after its measured
    window is used; one that measured nothing under load fails its cell (`cell_failure`)."""
    if step.get("state") not in USABLE_STEP_STATES and not lost_after_window(step, list(losses)):
        return f"step {step.get('state')}" + (", load lost in the measured window" if step.get("losses") else "")
    if not step.get("requests", 1):
        return "measured no requests"
    return ""


def cell_failure(step: dict) -> str:
    """Why a step fails its cell: it measured no request while clients or users were offered (a
    server that answered nothing in the window is a result, not a gap in the data)."""
    offered = float(step.get("offered") or 0)
    if step.get("requests", 1) or offered <= 0:
        return ""
    conns = step.get("concurrent_conns")
    held = f", {conns:g} connections open" if conns else ""
    return f"step {step.get('name')} measured 0 requests with {offered:g} offered{held}"


def invalid_reason(step: dict) -> str:
    """Why loadfleet marked the step invalid (summary.json `validity`), "" when it did not."""
    if step.get("validity") != "invalid":
        return ""
    return f"invalid: {step.get('validity_reasons') or 'marked so by loadfleet'}"


def design_figures(cell: dict, step: dict, plan: dict) -> dict[str, float]:
    """What a step's design allows it to see (design.py reads them): its measured window, the
    seconds its load lasts (the sweep's step_s; warm-up + window without one: a response counted
    in the window started after the step's load did), the request timeout."""
    window_s = float(step.get("measured_s") or 0)
    sweep = cell.get("sweep") or plan.get("sweep") or {}
    load_s = float(sweep.get("step_s") or 0) or float(sweep.get("warmup_s") or 0) + window_s
    figures = {"window_s": window_s, "load_s": load_s}
    request_ms = (plan.get("timeouts") or {}).get("request_ms")
    if request_ms:
        figures["request_timeout_s"] = float(request_ms) / 1000
    return figures


def step_observation(
    cell: dict, step: dict, losses: list[dict] = (), late: Late | None = None, plan: dict | None = None
) -> Observation:
    """The observation of one step of a stored run (`losses`: the summary's; `late`: its failures
    after the window, late.py; `plan`: the plan as it ran); `left_out`, `invalid` and `fails_cell`
    say why when its figures are not used."""
    variables = dict(cell.get("vars", {}))
    levels = cell.get("levels") or []
    index = int(step.get("level_index", 1)) - 1
    if 0 <= index < len(levels):
        variables.update(levels[index])
    for var, step_field in (cell.get("step_vars") or {}).items():
        variables[var] = step.get(step_field)
    figures = {name: step[name] for name in FIGURES if step.get(name) is not None}
    figures["generator_bound"] = 1.0 if step.get("generator_bound") else 0.0
    figures["losses"] = float(step.get("losses") or 0)
    figures["lost_after_window"] = 1.0 if lost_after_window(step, list(losses)) else 0.0
    if "error_pct" in figures:
        figures["window_error_pct"] = figures["error_pct"]
        figures["error_pct"] = strict_error_pct(step, late)
    figures["late_failed"] = late.failed if late else 0.0
    figures.update(design_figures(cell, step, plan or {}))
    return Observation(
        vars=variables,
        figures=figures,
        pass_no=int(cell.get("pass", 1)),
        run_id=str(cell.get("run_id", "")),
        left_out=left_out_reason(step, losses),
        invalid=invalid_reason(step),
        fails_cell=cell_failure(step),
    )


def budget_of(plan: dict) -> int | None:
    """The request budget of a run observed whole (no sweep: it ends when the budget is spent)."""
    budget = (plan.get("budget") or {}).get("requests")
    return None if plan.get("sweep") or not budget else int(budget)


def whole_run_observation(cell: dict, summary: dict, budget: int) -> Observation:
    """A run that ends with its request budget (a JMeter thread group), observed whole from its
    totals: every response, however late, as JMeter's aggregate report counts it; no window, so no
    failure falls after one. A run that ended short of its budget (its time bound, a lost agent)
    fails its cell: the test did not run to its size."""
    totals = summary.get("total", {}).get("figures", {})
    latency = totals.get("latency") or {}
    figures = {name: float(latency[name]) for name in FIGURES if latency.get(name) is not None}
    requests = float(totals.get("requests") or 0)
    figures["error_pct"] = float(totals.get("error_pct") or 0)
    figures["achieved_rps"] = float(totals.get("rps") or 0)
    figures["ok_rps"] = figures["achieved_rps"] * float(totals.get("ok") or 0) / requests if requests else 0.0
    figures["requests"] = requests
    steps = summary.get("steps") or [{}]
    figures["generator_bound"] = 1.0 if any(step.get("generator_bound") for step in steps) else 0.0
    counted = requests + sum((summary.get("late_requests") or {}).values())
    short = f"the run ended with {counted:,.0f} of its {budget:,} requests" if counted < budget else ""
    return Observation(
        vars=dict(cell.get("vars", {})),
        figures=figures,
        pass_no=int(cell.get("pass", 1)),
        run_id=str(cell.get("run_id", "")),
        invalid="; ".join(filter(None, (invalid_reason(step) for step in steps))),
        fails_cell=short,
    )


def run_step_observations(run_dir: Path, cell: dict, summary: dict) -> list[Observation]:
    """The observations of every step of a stored run, failures after their windows attributed; a
    run with a budget and no sweep is one observation, of the whole run."""
    plan = read_plan(run_dir)
    budget = budget_of(plan)
    if budget is not None:
        return [whole_run_observation(cell, summary, budget)]
    late = late_failures(summary, plan, read_interval_rows(run_dir))
    losses = summary.get("losses") or []
    return [
        step_observation(cell, step, losses, late.get(str(step.get("name"))), plan) for step in summary.get("steps", [])
    ]


def read_observations(study_dir: Path) -> list[Observation]:
    observations = []
    for run_dir in stored_run_dirs(study_dir):
        cell, summary = _read_run(run_dir)
        try:
            observations += run_step_observations(run_dir, cell, summary)
            observations += read_time_observations(run_dir, cell, summary)
        except (OSError, ValueError, KeyError) as exc:
            raise EvidenceError(f"{run_dir}: malformed intervals or plan: {exc!r}") from exc
    return observations
