"""The kit's restart of a study's labs before a cell: what it records, a cell that keeps its lab
warm, a restart that fails. `loadfleet-lab restart` itself is faked at the process boundary
(tests/targets/test_restart.py runs the real one)."""

import json
import subprocess
from pathlib import Path

import pytest

from bench.repro.reprokit import restarts
from bench.repro.reprokit.studies import Cell, LabSpec

LABS = (LabSpec("targets/specs/a.yaml", "build/a"), LabSpec("targets/specs/b.yaml", "build/b"))
CELL = Cell("nginx", {"server": "nginx"}, "plans/p.yaml")
OUTPUT = {
    "build/a": "restarted web1: http://127.0.0.2:18081 (nginx, pid 100 101 -> 200 201, 0.2 s)\n"
    "restarted lb: http://127.0.0.4:18083 (haproxy, pid 102 -> 202, 0.1 s)\n",
    "build/b": "restarted db: http://127.0.0.7:3306 (mariadb, pid 300 -> 400, 1.5 s)\n",
}


@pytest.fixture
def calls(monkeypatch):
    seen: list[list[str]] = []

    def run(argv, **kwargs):
        seen.append(argv)
        state_dir = argv[argv.index("--state-dir") + 1]
        return subprocess.CompletedProcess(argv, 0, OUTPUT[state_dir], "")

    monkeypatch.setattr(restarts.subprocess, "run", run)
    return seen


def command(lab: LabSpec) -> list[str]:
    return ["loadfleet-lab", "restart", "--state-dir", lab.state_dir]


def test_every_lab_is_restarted_and_each_server_recorded_with_its_pids(calls):
    record = restarts.restart_labs(LABS, CELL, command, ".")
    assert calls == [command(LABS[0]), command(LABS[1])]
    assert record.restarted and [lab.state_dir for lab in record.labs] == ["build/a", "build/b"]
    first = record.labs[0]
    assert [(s.name, s.kind, s.old_pids, s.new_pids) for s in first.servers] == [
        ("web1", "nginx", (100, 101), (200, 201)),
        ("lb", "haproxy", (102,), (202,)),
    ]
    assert first.started_utc.endswith("Z") and first.seconds >= 0
    assert record.summary.startswith("restarted 3 servers in ")


def test_a_cell_that_keeps_its_lab_warm_is_not_restarted_and_says_why(calls):
    soak = Cell("soak", {}, "plans/p.yaml", keep_warm="a soak measures the warm cache")
    record = restarts.restart_labs(LABS, soak, command, ".")
    assert calls == [] and not record.restarted and record.labs == ()
    assert record.summary == "not restarted (a soak measures the warm cache); idle share recorded"


def test_a_lab_that_does_not_restart_stops_the_cell_with_its_error(monkeypatch):
    def run(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 1, "", "loadfleet-lab: error: nginx web1 did not listen: bind failed")

    monkeypatch.setattr(restarts.subprocess, "run", run)
    with pytest.raises(restarts.RestartError, match=r"build/a failed \(1\): .*bind failed"):
        restarts.restart_labs(LABS, CELL, command, ".")


def test_a_cells_evidence_records_its_restart_next_to_the_load_average(tmp_path, monkeypatch):
    """run_cell with both commands faked (the lab's restart, the run): cell.json has the restart."""
    from bench.repro.reprokit import runner
    from bench.repro.reprokit.studies import Study

    (tmp_path / "plans").mkdir()
    (tmp_path / "plans/p.yaml").write_text("name: p\nduration_s: 1\n")
    run_dir = tmp_path / "runs" / "run-1"
    run_dir.mkdir(parents=True)
    order: list[str] = []

    def run(argv, **kwargs):
        if "restart" in argv:
            order.append("restart")
            return subprocess.CompletedProcess(argv, 0, OUTPUT[argv[argv.index("--state-dir") + 1]], "")
        order.append("run")
        assert Path(kwargs["cwd"]) == tmp_path  # the repository: the command's paths are relative to it
        relative = str(run_dir.relative_to(tmp_path))  # as loadfleet names it, given a relative --runs-dir
        summary = {"run_id": "run-1", "run_dir": relative, "state": "finished", "steps": []}
        (run_dir / "summary.json").write_text(json.dumps(summary))
        return subprocess.CompletedProcess(argv, 0, json.dumps(summary), "")

    monkeypatch.setattr(restarts.subprocess, "run", run)
    monkeypatch.setattr(runner, "idle_before", lambda: 90.0)  # the 1 s CPU sample is not under test
    study = Study("900", "t", LABS[:1], (CELL,), {}, ())
    options = runner.RunOptions(repo=tmp_path, evidence_dir=tmp_path / "evidence", work_dir=tmp_path / "work")
    stored = runner.run_cell(study, CELL, 1, options, lambda line: None)
    cell = json.loads((stored / "cell.json").read_text())
    assert order == ["restart", "run"]  # the servers restarted before the cell, not after
    assert cell["servers_before"].startswith("restarted 2 servers in ")
    [lab] = cell["restart"]["labs"]
    assert lab["state_dir"] == "build/a" and [s["name"] for s in lab["servers"]] == ["web1", "lb"]
    assert lab["servers"][0]["new_pids"] == [200, 201]
    assert "loadavg_1m" in cell and cell["idle_pct_before"] == 90.0
    # No machine's directories in the evidence: the command names the plan and runs relative to the repository.
    assert cell["command"][2:3] == ["work/plans/900-nginx.yaml"] and "work/runs" in cell["command"]
    # its relative run_dir found in the repository (this test runs elsewhere), its files kept
    assert json.loads((stored / "summary.json").read_text())["run_dir"] == "runs/run-1"
