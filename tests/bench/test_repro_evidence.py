"""bench/repro's stored evidence: a run's steps become observations placed by cell.json (the
cell's variables, the level's, the step's own fields); tables.md is written from them."""

from __future__ import annotations

import json

from bench.repro.reprokit.evidence import read_observations, step_observation, store_run, stored_runs
from bench.repro.reprokit.findings import Finding
from bench.repro.reprokit.studies import STUDIES, level_records
from bench.repro.reprokit.tables import study_tables
from bench.repro.reprokit.verdicts import Status, evaluate_findings


def step(level_index, mean_ms, state="finished", servers=1, requests=100, losses=0):
    return {
        "name": f"s{level_index}",
        "level_index": level_index,
        "servers": servers,
        "offered": 0.0,
        "state": state,
        "requests": requests,
        "losses": losses,
        "mean_ms": mean_ms,
        "stddev_ms": 1.0,
        "p99_ms": 3 * mean_ms,
        "error_pct": 0.0,
        "ok_rps": 100.0,
        "generator_bound": level_index == 2,
    }


def cell_record(setup, pass_no):
    return {
        "study": "001",
        "cell": f"{setup}-static",
        "vars": {"setup": setup, "page": "static"},
        "pass": pass_no,
        "run_id": f"run-{setup}-{pass_no}",
        "level_vars": ["users", "spawn_rate"],
        "levels": [{"users": 1000, "spawn_rate": 250}, {"users": 4000, "spawn_rate": 800}],
        "step_vars": {},
        "started_utc": f"2026-11-24T03:0{pass_no}:00Z",
        "loadavg_1m": 2.0,
    }


def test_a_step_is_placed_by_its_cell_level_and_fields():
    cell = {**cell_record("varnish", 2), "step_vars": {"cpus": "servers"}}
    observation = step_observation(cell, step(2, 5.0, servers=4))
    assert observation.vars == {"setup": "varnish", "page": "static", "users": 4000, "spawn_rate": 800, "cpus": 4}
    assert observation.figures["mean_ms"] == 5.0 and observation.figures["generator_bound"] == 1.0
    assert observation.pass_no == 2 and observation.left_out == ""
    assert (
        step_observation(cell, step(1, 5.0, state="failed", losses=2)).left_out
        == "step failed, load lost in the measured window"
    )
    assert step_observation(cell, step(1, 0.0, requests=0)).left_out == "measured no requests"


def test_stored_runs_are_read_back_evaluated_and_tabled(tmp_path):
    for pass_no in (1, 2, 3):
        for setup, mean in (("haproxy", 10.0), ("varnish", 1.0 * pass_no)):
            run_dir = tmp_path / "runs" / f"run-{setup}-{pass_no}"
            run_dir.mkdir(parents=True)
            (run_dir / "summary.json").write_text(
                json.dumps({"state": "finished", "steps": [step(1, mean / 2), step(2, mean)]})
            )
            (run_dir / "steps.csv").write_text("step\n")
            (run_dir / "report.html").write_text("big")
            store_run(run_dir, tmp_path / "001", cell_record(setup, pass_no))
    stored = tmp_path / "001" / "run-varnish-1"
    assert sorted(p.name for p in stored.iterdir()) == ["cell.json", "steps.csv", "summary.json"]
    assert len(stored_runs(tmp_path / "001")) == 6
    observations = read_observations(tmp_path / "001")
    assert len(observations) == 12
    finding = judged_finding(
        "reduction(mean_ms[setup=varnish,page=static,users=max,spawn_rate=max], "
        "mean_ms[setup=haproxy,page=static,users=max,spawn_rate=max])"
    )
    verdicts = evaluate_findings([finding], observations)
    assert verdicts[0].status is Status.HOLDS and verdicts[0].passes_holding() == (3, 3)
    markdown = study_tables("001", "title", stored_runs(tmp_path / "001"), verdicts)
    assert "| varnish-static | users=4000, spawn_rate=800 | 3 of 3 |" in markdown
    assert "2.00 ± 1.00" in markdown  # varnish's mean over its three passes
    assert "`001-x`" in markdown and "1 hold, 0 fail, 0 have not enough passes, 0 cannot be evaluated" in markdown


def test_every_study_names_its_levels():
    for study in STUDIES.values():
        records = level_records(study, study.sweep.get("steps", []))  # 003's plans run as written
        assert len(records) == len(study.sweep.get("steps", []))
        assert all(set(study.level_vars) <= set(r) for r in records)
    assert level_records(STUDIES["001"], [[1000, 250]]) == [{"users": 1000, "spawn_rate": 250}]


def test_a_selection_emptied_by_failed_steps_says_so():
    cells = [cell_record("haproxy", 1), cell_record("varnish", 1)]
    observations = [
        step_observation(cells[0], step(2, 9.0, state="failed", losses=2)),
        step_observation(cells[1], step(2, 1.0)),
    ]
    finding = judged_finding("reduction(mean_ms[setup=varnish,users=max], mean_ms[setup=haproxy,users=max])")
    verdict = evaluate_findings([finding], observations)[0]
    assert verdict.status is Status.NOT_EVALUABLE
    assert "setup=haproxy" in verdict.reason
    assert "1 such step(s) ran but are left out (step failed, load lost in the measured window)" in verdict.reason


def test_a_step_that_failed_only_after_its_measured_window_is_used():
    failed = {**step(2, 5.0, state="failed", losses=2), "start_ms": 10_000, "measured_s": 4.0, "intervals": 4}
    after = [{"step": "s2", "at_ms": 14_500}, {"step": "s2", "at_ms": 14_600}, {"step": "s1", "at_ms": 1}]
    during = [{"step": "s2", "at_ms": 12_000}]
    assert step_observation(cell_record("haproxy", 1), failed, after).left_out == ""
    assert step_observation(cell_record("haproxy", 1), failed, after).figures["lost_after_window"] == 1.0
    assert step_observation(cell_record("haproxy", 1), failed, during).left_out.startswith("step failed")


def judged_finding(metric: str) -> Finding:
    """A study 001 finding: `metric` at least 0.5, a threshold of judgement."""
    return Finding(
        study="001",
        id="001-x",
        text="t",
        comparison=">=",
        threshold=0.5,
        threshold_basis="judgement",
        kind="relative",
        reproducible_here="partly",
        metric=metric,
    )
