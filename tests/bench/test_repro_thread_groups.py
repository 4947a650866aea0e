"""Study 000 in its paper's regime: JMeter thread groups (threads x loops = a test's requests, run
to that budget and observed whole from the run's totals), on a lab whose hosts run the cells (a
100 Mbit/s link), and a cell's changes to its plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bench.repro.reprokit import runner
from bench.repro.reprokit.evidence import run_step_observations, store_run, whole_run_observation
from bench.repro.reprokit.studies import STUDIES, TEST_SIZES_000, Cell, LabSpec, Study


def totals(requests: int, ok: int, mean_ms: float = 2.0) -> dict:
    latency = {"mean_ms": mean_ms, "stddev_ms": 3.0, "p50_ms": 1.0, "p90_ms": 4.0, "p99_ms": 9.0}
    figures = {"requests": requests, "ok": ok, "error_pct": 100 * (requests - ok) / requests, "rps": 500.0}
    return {"figures": {**figures, "latency": latency}}


def summary(requests: int, ok: int, **extra) -> dict:
    step = {"name": "main", "state": "finished", "validity": "valid", "generator_bound": False}
    return {"state": "finished", "total": totals(requests, ok), "steps": [step], **extra}


CELL = {"cell": "apache-fixed-70k", "vars": {"server": "apache", "design": "fixed", "requests": 70000}, "pass": 2}


def test_each_test_is_a_thread_group_of_its_size_run_to_its_budget():
    study = STUDIES["000"]
    assert study.run_on == "ctrl" and not study.sweep and len(study.labs) == 1
    assert len(study.cells) == len(TEST_SIZES_000) * 2 * 2  # sizes x designs x servers
    threads = {}
    for cell in study.cells:
        load, budget = cell.changes["load"], cell.changes["budget"]["requests"]
        loops = cell.changes["workload"]["session"]["repeat"]
        assert load["users"] * loops == budget == cell.vars["requests"], cell.name
        assert load["spawn_rate"] == load["users"]  # all threads within a second
        threads.setdefault(cell.vars["design"], set()).add(load["users"])
    assert threads["fixed"] == {100}
    assert min(threads["growing"]) == 1000 > 768 and max(threads["growing"]) == 7000


def test_a_thread_group_is_observed_whole_from_the_runs_totals():
    observation = whole_run_observation(CELL, summary(70000, 69300), 70000)
    assert observation.vars == CELL["vars"] and observation.pass_no == 2 and observation.usable
    assert observation.figures["mean_ms"] == 2.0 and observation.figures["stddev_ms"] == 3.0
    assert observation.figures["error_pct"] == pytest.approx(1.0)
    assert observation.figures["ok_rps"] == pytest.approx(495.0)
    assert "load_s" not in observation.figures  # no window: the design flags do not apply


def test_a_run_that_stopped_short_of_its_budget_fails_its_cell():
    observation = whole_run_observation(CELL, summary(55394, 55394), 70000)
    assert observation.fails_cell == "the run ended with 55,394 of its 70,000 requests"
    late = whole_run_observation(CELL, summary(69990, 69990, late_requests={"agent1": 10}), 70000)
    assert late.fails_cell == ""  # responses after the run's end still ran to the budget


def test_a_generator_bound_or_invalid_run_says_so():
    doc = summary(70000, 70000)
    doc["steps"][0].update(generator_bound=True, validity="invalid", validity_reasons="engine CPU 97 %")
    observation = whole_run_observation(CELL, doc, 70000)
    assert observation.figures["generator_bound"] == 1.0
    assert observation.invalid == "invalid: engine CPU 97 %" and not observation.usable


def test_a_stored_budget_run_is_one_observation_and_names_its_directory_from_the_repository(tmp_path):
    run_dir = tmp_path / "lab" / "runs" / "run-1"
    run_dir.mkdir(parents=True)
    doc = summary(10000, 10000, run_id="run-1", run_dir=str(run_dir))
    (run_dir / "summary.json").write_text(json.dumps(doc))
    (run_dir / "plan.yaml").write_text(yaml.safe_dump({"budget": {"requests": 10000}, "duration_s": 600}))
    stored = store_run(run_dir, tmp_path / "000", {**CELL, "run_id": "run-1"}, "build/lab/runs/run-1")
    assert json.loads((stored / "summary.json").read_text())["run_dir"] == "build/lab/runs/run-1"
    (observation,) = run_step_observations(stored, {**CELL, "run_id": "run-1"}, doc)
    assert observation.figures["requests"] == 10000 and observation.usable


@pytest.fixture
def options(tmp_path):
    (tmp_path / "plans").mkdir()
    workload = {"requests": [{"name": "page", "path": "/"}], "session": {"steps": [{"request": "page"}], "repeat": 100}}
    plan = {"name": "tg", "load": {"model": "users", "users": 100, "spawn_rate": 100}, "workload": workload}
    (tmp_path / "plans" / "tg.yaml").write_text(yaml.safe_dump(plan))
    return runner.RunOptions(repo=tmp_path, evidence_dir=tmp_path / "evidence", work_dir=tmp_path / "work")


def hosts_study(changes: dict) -> Study:
    target = {"web": "http://10.0.0.10:80"}
    cell = Cell("nginx-fixed-70k", {"server": "nginx"}, "plans/tg.yaml", target, changes=changes)
    lab = LabSpec("specs/hosts.yaml", "build/hosts")
    return Study("999", "t", (lab,), (cell,), {}, (), generator_cpus="0", run_on="ctrl")


def test_a_cells_changes_go_into_its_plan_section_by_section(options):
    s = hosts_study({"load": {"users": 7000, "spawn_rate": 7000}, "workload": {"session": {"repeat": 10}}})
    _, plan = runner.derive_plan(s, s.cells[0], options)
    assert plan["load"] == {"model": "users", "users": 7000, "spawn_rate": 7000}
    assert plan["workload"]["session"] == {"steps": [{"request": "page"}], "repeat": 10}
    assert plan["workload"]["requests"] == [{"name": "page", "path": "/"}]


def test_a_study_on_lab_hosts_runs_its_cells_on_the_labs_controller_host(options):
    s = hosts_study({})
    plan_path, _ = runner.derive_plan(s, s.cells[0], options)
    command = runner.run_command(s, s.cells[0], plan_path, options)
    exec_at = command.index(runner._tool("loadfleet-lab"))
    assert command[exec_at + 1 : exec_at + 6] == ["exec", "--state-dir", "build/hosts", "ctrl", "--"]
    assert "--local" not in command and "--runs-dir" not in command
    named = runner._named_command(command)
    assert named[:7] == ["loadfleet-lab", "exec", "--state-dir", "build/hosts", "ctrl", "--", "loadfleet"]
    local = runner.run_command(STUDIES["004"], STUDIES["004"].cells[0], plan_path, options)
    assert "--local" in local and runner._named_command(local)[:2] == ["loadfleet", "run"]


def test_a_study_runs_as_many_local_agents_as_it_declares(options):
    """Study 003 holds more connections than one process may open: two agents, each an engine."""

    def agents(study):
        command = runner.run_command(study, study.cells[0], Path("plan.yaml"), options)
        return command[command.index("--local") + 1]

    assert agents(STUDIES["004"]) == "1"
    assert agents(STUDIES["003"]) == "2"


def test_passes_of_other_thread_groups_are_refused(options):
    run = options.evidence_dir / "999" / "run1"
    run.mkdir(parents=True)
    stored = {"load": {"users": 100}, "budget": {"requests": 70000}}
    (run / "cell.json").write_text(json.dumps({"cell": "nginx-fixed-70k", "pass": 1, "sweep": {}, "changes": stored}))
    runner.check_stored_design(hosts_study(stored), options)  # the same design: no error
    with pytest.raises(runner.RunnerError, match="passes of two designs cannot be one experiment"):
        runner.check_stored_design(hosts_study({**stored, "load": {"users": 200}}), options)
