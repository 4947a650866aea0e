"""Runs a study: its labs up, its cells interleaved and repeated, each run's evidence stored, the
labs down again (also on failure or Ctrl-C). Only labs of the repository's specs: on loopback, or
on hosts of their own (network namespaces behind the guard route) whose controller runs the cells.

Progress goes to `log` (stderr from the CLI), one line per event.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from .evidence import store_run
from .restarts import RestartError, restart_labs
from .studies import Cell, LabSpec, Study, level_records, load_s, paper_s_per_run_s

RUN_SLACK_S = 90  # a run's bound beyond its steps: agents starting, the last interval, summary
LAB_TIMEOUT_S = 300
ACCEPTED_EXITS = (0, 3)  # finished; ended by a stop condition (its steps are still evidence)


class RunnerError(Exception):
    """A lab that would not start, or a run that failed; the message says which."""


@dataclass(frozen=True)
class RunOptions:
    repo: Path
    evidence_dir: Path
    work_dir: Path
    repeat: int = 3
    nice: int = 5
    sweep: dict | None = None  # overrides of the study's own sweep overrides


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else (shutil.which(name) or name)


def cell_sweep(study: Study, cell: Cell, options: RunOptions) -> dict:
    """The sweep the cell runs (its cluster sizes in the study's order): the plan's, with the
    study's and the command line's overrides."""
    plan = yaml.safe_load((options.repo / cell.plan).read_text())
    return {**plan.get("sweep", {}), **study.sweep, **(options.sweep or {})}


def merged(plan: dict, changes: dict) -> dict:
    """`plan` with `changes` over it: mappings merged key by key, any other value replaced."""
    out = dict(plan)
    for key, value in changes.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def derive_plan(study: Study, cell: Cell, options: RunOptions, pass_no: int = 1) -> tuple[Path, dict]:
    """The cell's plan with its changes and the study's sweep, written to the work directory; and
    the plan as it runs (a plan without a sweep, in a study without one, keeps none). A study that
    shuffles its cluster sizes gets them in the order of the pass and cell's own seed."""
    source = options.repo / cell.plan
    plan = merged(yaml.safe_load(source.read_text()), cell.changes)
    sweep = cell_sweep(study, cell, options)
    if study.shuffle_servers and sweep.get("servers"):
        sweep["servers"] = list(sweep["servers"])
        random.Random(f"{study.id}/{cell.name}/{pass_no}").shuffle(sweep["servers"])
    if sweep:
        plan["sweep"] = sweep
    manifest = plan.get("workload", {}).get("manifest")
    if manifest:  # relative to the plan's own directory, which the copy leaves
        plan["workload"]["manifest"] = str((source.parent / manifest).resolve())
    plan["name"] = f"{plan.get('name', cell.name)}-{cell.name}"
    out = options.work_dir / "plans" / f"{study.id}-{cell.name}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f"# derived from {cell.plan} by python -m bench.repro.reproduce (study {study.id})\n"
        + yaml.safe_dump(plan, sort_keys=False)
    )
    return out, plan


def run_bound_s(plan: dict) -> float:
    """How long a run of `plan` may take before it is killed: its load, each step's warm-up and
    barrier, and RUN_SLACK_S."""
    sweep = plan.get("sweep") or {}
    steps = len(sweep.get("steps", [1])) * len(sweep.get("servers", [1])) * int(sweep.get("repeat", 1))
    return load_s(plan) + steps * (float(sweep.get("warmup_s", 0)) + 2) + RUN_SLACK_S


def _niced(command: list[str], options: RunOptions, cpus: str = "") -> list[str]:
    """`command` niced, and pinned to `cpus` with taskset when given (an unpinned generator would
    spread over the servers' cores: refused rather than run silently unpinned)."""
    prefix = ["nice", "-n", str(options.nice)]
    if cpus:
        if not shutil.which("taskset"):
            raise RunnerError(f"taskset not found: the generator must run pinned to CPU(s) {cpus}")
        prefix += ["taskset", "-c", cpus]
    return prefix + command


IDLE_SAMPLE_S = 1.0  # how long the CPU's idle share is sampled before each cell


def _cpu_times() -> tuple[int, int] | None:
    """(idle + iowait, total) jiffies of all CPUs from /proc/stat; None where there is none."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return fields[3] + (fields[4] if len(fields) > 4 else 0), sum(fields)


def idle_before(sample_s: float = IDLE_SAMPLE_S) -> float | None:
    """The machine's idle CPU share (%) over `sample_s` seconds: recorded before each cell, so that a
    cell measured beside another load (servers still busy draining the last cell, a build) shows."""
    first = _cpu_times()
    time.sleep(sample_s)
    second = _cpu_times()
    if not first or not second or second[1] <= first[1]:
        return None
    return 100.0 * (second[0] - first[0]) / (second[1] - first[1])


class LabSession:
    """The study's labs, up on enter and down on exit, whatever happened in between."""

    def __init__(self, study: Study, options: RunOptions, log: Callable[[str], None]):
        self.study, self.options, self.log = study, options, log
        self.started: list = []

    def __enter__(self):
        try:
            for lab in self.study.labs:
                self.log(f"lab up: {lab.spec} (state {lab.state_dir})")
                command = _niced([_tool("loadfleet-lab"), "up", lab.spec, "--state-dir", lab.state_dir], self.options)
                self.started.append(lab)
                done = subprocess.run(
                    command, cwd=self.options.repo, capture_output=True, text=True, timeout=LAB_TIMEOUT_S
                )
                if done.returncode != 0:
                    raise RunnerError(
                        f"loadfleet-lab up {lab.spec} failed ({done.returncode}): "
                        f"{(done.stderr or done.stdout).strip()[-800:]}"
                    )
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc_info):
        for lab in reversed(self.started):
            self.log(f"lab down: {lab.state_dir}")
            done = subprocess.run(
                [_tool("loadfleet-lab"), "down", "--state-dir", lab.state_dir],
                cwd=self.options.repo,
                capture_output=True,
                text=True,
                timeout=LAB_TIMEOUT_S,
            )
            if done.returncode != 0:
                self.log(f"lab down {lab.state_dir} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
        self.started = []
        return False


def _restart_command(lab: LabSpec, options: RunOptions) -> list[str]:
    return _niced([_tool("loadfleet-lab"), "restart", "--state-dir", lab.state_dir], options)


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _in_repo(path: Path, options: RunOptions) -> Path:
    """`path` as the run's command names it: relative to the repository, where the command runs,
    so the evidence kept of it (cell.json's command, summary.json's run_dir) names no machine's
    directories."""
    return path.relative_to(options.repo) if path.is_relative_to(options.repo) else path


def run_command(study: Study, cell: Cell, plan_path: Path, options: RunOptions) -> list[str]:
    """The cell's `loadfleet run`: with `--local` agents writing to the work directory, or on the
    lab's `run_on` host with the lab's agents (its controller writes the run under the lab's state
    directory)."""
    run = [_tool("loadfleet"), "run", str(_in_repo(plan_path, options)), "--json"]
    for name, url in cell.targets.items():
        run += ["--target", f"{name}={url}"]
    if study.run_on:
        (lab,) = study.labs  # one lab: the one whose hosts run the cell
        exec_prefix = [_tool("loadfleet-lab"), "exec", "--state-dir", lab.state_dir, study.run_on, "--"]
        return _niced(exec_prefix + run, options, study.generator_cpus)
    local = ["--local", str(study.local_agents), "--runs-dir", str(_in_repo(options.work_dir / "runs", options))]
    return _niced(run + local, options, study.generator_cpus)


def _named_command(command: list[str]) -> list[str]:
    """The command as the evidence keeps it: from the first of our tools on, each by its name (no
    venv path, no nice/taskset prefix: the generator's CPUs are recorded apart)."""
    tools = {_tool("loadfleet-lab"): "loadfleet-lab", _tool("loadfleet"): "loadfleet"}
    first = next(index for index, part in enumerate(command) if part in tools)
    return [tools.get(part, part) for part in command[first:]]


def run_cell(study: Study, cell: Cell, pass_no: int, options: RunOptions, log: Callable[[str], None]) -> Path:
    """Runs one cell once and stores its evidence; returns the stored directory."""
    plan_path, plan = derive_plan(study, cell, options, pass_no)
    sweep = plan.get("sweep") or {}
    command = run_command(study, cell, plan_path, options)
    try:  # the servers restarted (or kept warm) just before the load average and idle share
        restart = restart_labs(study.labs, cell, lambda lab: _restart_command(lab, options), str(options.repo))
    except RestartError as exc:
        raise RunnerError(str(exc)) from exc
    log(f"  {cell.name}: servers {restart.summary}")
    load, idle = _loadavg(), idle_before()  # before the cell: the servers were idle or not
    started = dt.datetime.now(dt.UTC)
    bound = run_bound_s(plan)
    try:
        done = subprocess.run(command, cwd=options.repo, capture_output=True, text=True, timeout=bound)
    except subprocess.TimeoutExpired as exc:
        raise RunnerError(f"{cell.name}: no end after {bound:.0f} s (the run was killed)") from exc
    try:
        summary = json.loads(done.stdout)
    except ValueError as exc:
        raise RunnerError(
            f"{cell.name}: loadfleet run exited {done.returncode} without a JSON summary: {done.stderr.strip()[-800:]}"
        ) from exc
    run_dir = options.repo / Path(summary.get("run_dir") or options.work_dir / "runs" / summary["run_id"])
    record = {
        "study": study.id,
        "cell": cell.name,
        "vars": cell.vars,
        "pass": pass_no,
        "run_id": summary["run_id"],
        "plan": cell.plan,
        "targets": cell.targets,
        "changes": cell.changes,
        "lab_specs": [lab.spec for lab in study.labs],
        "level_vars": list(study.level_vars),
        "levels": level_records(study, sweep.get("steps", [])),
        "step_vars": study.step_vars,
        "sweep": sweep,
        "paper_s_per_run_s": paper_s_per_run_s(study, plan),
        "command": _named_command(command),
        "generator_cpus": study.generator_cpus,
        "started_utc": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "loadavg_1m": load,
        "idle_pct_before": idle,
        "servers_before": restart.summary,
        "restart": dataclasses.asdict(restart),
        "exit_code": done.returncode,
        "state": summary.get("state"),
    }
    stored = store_run(run_dir, options.evidence_dir / study.id, record, str(_in_repo(run_dir, options)))
    log(
        f"  stored {stored.relative_to(options.repo) if stored.is_relative_to(options.repo) else stored}"
        f" ({summary.get('state')}, exit {done.returncode})"
    )
    for step in summary.get("steps", []):
        log(
            f"    {step['name']}: offered {step['offered']:g}, ok/s {step['ok_rps']:.1f}, "
            + (
                f"mean {step['mean_ms']:.2f} ms, p99 {step['p99_ms']:.1f} ms,"
                if step.get("mean_ms") is not None  # null: no response carried a latency
                else "no latency (no response),"
            )
            + f" errors {step['error_pct']:.2f} %"
            f"{', generator-bound' if step.get('generator_bound') else ''}"
        )
    if done.returncode not in ACCEPTED_EXITS:  # stored all the same: a failed run is evidence too
        raise RunnerError(
            f"{cell.name}: run {summary['run_id']} {summary.get('state')} (exit {done.returncode}): "
            f"{summary.get('message', '')}"
        )
    return stored


def pass_order(study: Study, pass_no: int) -> tuple[Cell, ...]:
    """The cells of a pass in the order it runs them: as listed, reversed on even passes."""
    return study.cells if pass_no % 2 else tuple(reversed(study.cells))


def passes_to_run(study: Study, study_dir: Path, repeat: int) -> list[tuple[int, tuple[Cell, ...]]]:
    """`repeat` passes as (pass number, its cells in order): first the rest of the last stored pass
    when a session ended (or a cell failed) before it was whole, then new passes after it."""
    stored = [json.loads(path.read_text()) for path in study_dir.glob("*/cell.json")]
    last = max((record.get("pass", 0) for record in stored), default=0)  # new passes follow it
    done = {record.get("cell") for record in stored if record.get("pass") == last}
    passes = []
    missing = tuple(c for c in pass_order(study, last) if c.name not in done) if last else ()
    if missing:
        passes.append((last, missing))
    passes += [(n, pass_order(study, n)) for n in range(last + 1, last + 1 + repeat - len(passes))]
    return passes


def _design(sweep: dict, changes: dict, shuffled: bool) -> dict:
    """What two runs of a cell must share for their passes to be one experiment: the sweep, with
    its cluster sizes as a set when each run shuffles them, and the cell's changes to its plan."""
    if shuffled and "servers" in sweep:
        sweep = {**sweep, "servers": sorted(sweep["servers"])}
    return {"sweep": sweep, "changes": changes} if changes else sweep


def check_stored_design(study: Study, options: RunOptions) -> None:
    """Refuses to add passes to stored runs of another design (other levels, step lengths, cluster
    sizes, plan changes): their passes would be averaged with the new ones as if they were one experiment."""
    stored: dict[str, dict] = {}
    for path in sorted((options.evidence_dir / study.id).glob("*/cell.json")):
        record = json.loads(path.read_text())
        design = _design(record.get("sweep") or {}, record.get("changes") or {}, study.shuffle_servers)
        stored.setdefault(record.get("cell", ""), design)
    for cell in study.cells:
        wanted = _design(cell_sweep(study, cell, options), cell.changes, study.shuffle_servers)
        if cell.name in stored and stored[cell.name] != wanted:
            raise RunnerError(
                f"cell {cell.name}: the runs stored in {options.evidence_dir / study.id} have the design "
                f"{stored[cell.name]}, this run would have {wanted}; passes of two designs cannot be one "
                "experiment: run with the stored settings, or move the stored runs away to start over"
            )


def run_study(study: Study, options: RunOptions, log: Callable[[str], None]) -> list[str]:
    """Every cell `repeat` times, interleaved (the order reversed on even passes), numbered after the
    passes already stored (the first completing the last stored pass if it is not whole); returns
    the failures (empty when every run finished). The labs are down again when it returns. Raises
    RunnerError before anything runs when the stored runs are of another design."""
    failures = []
    check_stored_design(study, options)
    passes = passes_to_run(study, options.evidence_dir / study.id, options.repeat)
    with LabSession(study, options, log):
        for number, (pass_no, order) in enumerate(passes, 1):
            rest = " (the rest of it)" if len(order) < len(study.cells) else ""
            for index, cell in enumerate(order, 1):
                log(
                    f"[study {study.id} pass {number}/{options.repeat} (stored as {pass_no}){rest}]"
                    f" {index}/{len(order)} {cell.name}"
                    f" (load {_loadavg() or 0:.1f})"
                )
                try:
                    run_cell(study, cell, pass_no, options, log)
                except RunnerError as exc:
                    log(f"  FAILED: {exc}")
                    failures.append(str(exc))
    return failures
