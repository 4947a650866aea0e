"""bench/repro's per-interval evidence: a run's intervals.csv reduced to its cluster totals when it is
stored, placed on the paper's time axis (`t`, `first_error_s`) when it is read, and study 003's
findings evaluated from synthetic runs written here (no load is run)."""

from __future__ import annotations

import csv
import json
import math

import pytest
import yaml

from bench.repro.reprokit.evidence import read_observations, store_run
from bench.repro.reprokit.findings import load_findings
from bench.repro.reprokit.intervals import (
    INTERVALS_FILE,
    KEPT_COLUMNS,
    USERS_COLUMN,
    IntervalRow,
    LoadWindow,
    RunClock,
    keep_cluster_intervals,
    run_clock,
)
from bench.repro.reprokit.studies import STUDIES, paper_s_per_run_s
from bench.repro.reprokit.tables import time_table
from bench.repro.reprokit.verdicts import Status, evaluate_findings
from loadfleet.controller.output.intervalscsv import INTERVAL_COLUMNS
from support.procs import REPO

INTERVAL_MS = 1000
STEP_S = 10
WARMUP_S = 2
PAUSE_MS = 2000  # between steps, as the controller leaves one (its barrier's lead)
LOAD_START_MS = 1_795_000_000_000
SCALE = 120 / STEP_S  # study 003: a 2-minute phase of the paper per step
# A column of the controller's intervals.csv that the evidence does not keep.
SOURCE_COLUMNS = ["interval_start_ms", "scope", "agent", "target", "request", "requests", "ok", "failed"]
SOURCE_COLUMNS += ["status_2xx", "active_conns", "rps", "mean_ms", "p99_ms", "max_ms"]


def paper_t(step: int, second: int) -> float:
    """Where the clock must put second `second` of step `step` (0-based)."""
    return (step * STEP_S + second) * SCALE


def erlang(t: float) -> tuple[int, int, int]:
    """(ok/s, failed/s, users) the paper describes for its Erlang server at t: users grow until
    150 s, requests/s fall after it, errors from 156 s (the paper: 160 s)."""
    ok = 500 if t < 120 else (1000 if t < 150 else 600)
    return ok, (40 if t >= 156 else 0), int(min(t, 150) * 450)


def apache(t: float) -> tuple[int, int, int]:
    """Apache worker: requests/s collapse after 50 s, errors from 84 s, users stay under 4,500."""
    return (2000 if t < 60 else 700), (90 if t >= 84 else 0), int(min(3000 + 10 * t, 4200))


def no_errors(profile):
    return lambda t: (*profile(t)[:1], 0, profile(t)[2])


def intervals_csv(profile, with_users: bool = True) -> str:
    """A run's intervals.csv: per interval a cluster total row, a per-target cluster row and an agent
    row (only the first is kept), over two steps of STEP_S with a pause between them."""
    columns = SOURCE_COLUMNS + (["users"] if with_users else []) + ["validity"]
    lines = [",".join(columns)]
    for step in range(2):
        load_start = LOAD_START_MS + step * (STEP_S * 1000 + PAUSE_MS)
        for second in range(STEP_S):
            ok, failed, users = profile(paper_t(step, second))
            start = load_start + second * INTERVAL_MS
            for scope, agent, target in (("cluster", "", "*"), ("cluster", "", "http://a"), ("agent", "a1", "*")):
                share = 1 if target == "*" and scope == "cluster" else 3  # wrong on purpose: must not be kept
                values = {
                    "interval_start_ms": start,
                    "scope": scope,
                    "agent": agent,
                    "target": target,
                    "request": "*",
                    "requests": (ok + failed) * share,
                    "ok": ok * share,
                    "failed": failed * share,
                    "status_2xx": ok,
                    "active_conns": 3,
                    "rps": float(ok + failed),
                    "mean_ms": 1.5,
                    "p99_ms": 4.0,
                    "max_ms": 9.0,
                    "users": users * share,
                    "validity": "valid",
                }
                lines.append(",".join(str(values[c]) for c in columns))
    return "\n".join(lines) + "\n"


def steps_of_run() -> list[dict]:
    """The summary's steps: each starts (its first measured interval) after its warm-up."""
    return [
        {
            "name": f"s{k + 1}",
            "level_index": k + 1,
            "state": "finished",
            "start_ms": LOAD_START_MS + k * (STEP_S * 1000 + PAUSE_MS) + WARMUP_S * 1000,
            "requests": 100,
            "ok_rps": 500.0 * (k + 1),
            "mean_ms": 1.5,
        }
        for k in range(2)
    ]


def write_run(tmp_path, study_dir, server, pass_no, profile, with_users=True):
    run_id = f"run-{server}-{pass_no}"
    run_dir = tmp_path / "runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps({"state": "finished", "steps": steps_of_run()}))
    (run_dir / "steps.csv").write_text("step\n")
    plan = {"interval_ms": INTERVAL_MS, "sweep": {"steps": [500, 1000], "step_s": STEP_S, "warmup_s": WARMUP_S}}
    (run_dir / "plan.yaml").write_text(yaml.safe_dump(plan))
    (run_dir / "intervals.csv").write_text(intervals_csv(profile, with_users))
    cell = {
        "study": "003",
        "cell": server,
        "vars": {"server": server},
        "pass": pass_no,
        "run_id": run_id,
        "level_vars": ["rate"],
        "levels": [{"rate": 500}, {"rate": 1000}],
        "paper_s_per_run_s": paper_s_per_run_s(STUDIES["003"], plan),
    }
    return store_run(run_dir, study_dir, cell)


def verdicts_of(study_dir):
    findings = load_findings(REPO / "docs" / "reproductions" / "findings.yaml", "003")
    return {v.finding.id: v for v in evaluate_findings(findings, read_observations(study_dir))}


def test_the_kept_intervals_are_the_cluster_totals_with_few_columns(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "plan.yaml").write_text("interval_ms: 500\n")
    (run_dir / "intervals.csv").write_text(intervals_csv(erlang))
    kept = keep_cluster_intervals(run_dir, tmp_path)
    with kept.open(newline="") as lines:
        rows = list(csv.DictReader(lines))
    assert kept.name == INTERVALS_FILE
    assert list(rows[0]) == [
        "interval_ms",
        "interval_start_ms",
        "requests",
        "ok",
        "failed",
        "rps",
        "mean_ms",
        "p99_ms",
        "active_conns",
        "users",
        "validity",
    ]
    assert len(rows) == 2 * STEP_S  # one row per interval: the per-target and agent rows are left
    assert {r["interval_ms"] for r in rows} == {"500"}
    assert [int(r["users"]) for r in rows[:3]] == [erlang(paper_t(0, s))[2] for s in range(3)]


def test_the_kept_columns_are_the_controllers():
    """A column renamed in the controller's intervals.csv would silently vanish from the evidence."""
    assert set(KEPT_COLUMNS) - {USERS_COLUMN} <= set(INTERVAL_COLUMNS)


def test_intervals_without_a_users_column_are_kept_without_it(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "intervals.csv").write_text(intervals_csv(erlang, with_users=False))
    with keep_cluster_intervals(run_dir, tmp_path).open(newline="") as lines:
        header = next(csv.reader(lines))
    assert "users" not in header and "interval_ms" in header
    assert keep_cluster_intervals(tmp_path / "no-such-run", tmp_path / "elsewhere") is None


def test_the_clock_leaves_the_pause_between_steps_out_and_scales_to_the_paper():
    plan = {"interval_ms": INTERVAL_MS, "sweep": {"step_s": STEP_S, "warmup_s": WARMUP_S}}
    clock = run_clock(plan, steps_of_run(), [], SCALE)
    second_step = LOAD_START_MS + STEP_S * 1000 + PAUSE_MS
    assert clock.t(LOAD_START_MS) == 0
    assert clock.t(LOAD_START_MS + 8 * INTERVAL_MS) == 96
    assert clock.t(LOAD_START_MS + 9 * INTERVAL_MS) is None  # the step's last interval holds its drain
    assert clock.t(second_step) == 120  # the paper's second phase starts at 2 minutes
    assert clock.t(second_step + 3 * INTERVAL_MS) == 156
    assert clock.t(LOAD_START_MS + STEP_S * 1000) is None  # in the pause: no t
    unscaled = RunClock((LoadWindow(0, 0, math.inf),), 0.0)
    assert unscaled.t(2500) == 2.5
    # Without a sweep: the plan's duration from the first interval, its last interval left out.
    single = run_clock({"duration_s": 48}, [], [IntervalRow(5000, 1000, 1, 1, 0, 1.0, 1.0, 1.0, 1, 1, "valid")], 5.0)
    assert (single.t(5000), single.t(5000 + 46_000), single.t(5000 + 47_000)) == (0, 230, None)


def test_a_warm_up_is_rounded_up_to_whole_intervals_to_find_the_load_start():
    plan = {"interval_ms": 2000, "sweep": {"step_s": 10, "warmup_s": 3}}  # warm-up: 2 intervals, 4 s
    clock = run_clock(plan, [{"start_ms": 14_000}, {"start_ms": 0}], [], 1.0)
    assert clock.windows == (LoadWindow(0, 10_000, 20_000),)  # the step that measured nothing is not placed


def test_study_003_scales_its_runs_to_the_papers_four_minutes():
    # The plans as they run: two 24 s stages (the paper's two 2-minute phases), or a sweep of them.
    assert paper_s_per_run_s(STUDIES["003"], {"duration_s": 48}) == 5
    assert paper_s_per_run_s(STUDIES["003"], {"sweep": {"steps": [500, 1000], "step_s": 10}}) == 12
    assert paper_s_per_run_s(STUDIES["003"], {"sweep": {"steps": [500, 1000], "step_s": 20}}) == 6
    assert paper_s_per_run_s(STUDIES["001"], {"sweep": {"steps": [8], "step_s": 10}}) == 1


def test_the_papers_findings_over_time_hold_or_fail_on_runs_shaped_like_the_paper(tmp_path):
    study_dir = tmp_path / "003"
    for pass_no in (1, 2, 3):  # a finding holds only in 3 passes or more
        write_run(tmp_path, study_dir, "erlang", pass_no, erlang)
        write_run(tmp_path, study_dir, "apache-worker", pass_no, apache)
    assert (study_dir / "run-erlang-1" / INTERVALS_FILE).exists()
    verdicts = verdicts_of(study_dir)
    before_errors = (erlang(paper_t(1, 2))[2], apache(paper_t(0, 6))[2])  # t=144 and t=72
    expected = {
        "003-erlang-errors-in-phase-two": (Status.HOLDS, 156),
        "003-apache-errors-in-phase-one": (Status.HOLDS, 84),
        "003-concurrent-users-ratio": (Status.HOLDS, before_errors[0] / before_errors[1]),
        "003-erlang-65000-concurrent": (Status.FAILS, 64_800),  # 450 users/s until 144 s: short of 65,000
        "003-apache-concurrent-cap": (Status.HOLDS, 4200),
        "003-erlang-plateau-150s": (Status.HOLDS, 600 / 1000),
        "003-apache-rps-collapses": (Status.HOLDS, 700),
    }
    got = {fid: (v.status, v.value) for fid, v in verdicts.items()}
    assert got == {fid: (status, pytest.approx(value)) for fid, (status, value) in expected.items()}
    assert verdicts["003-erlang-errors-in-phase-two"].passes_holding() == (3, 3)


def test_the_tables_show_each_cells_users_over_time(tmp_path):
    study_dir = tmp_path / "003"
    for pass_no in (1, 2):
        write_run(tmp_path, study_dir, "erlang", pass_no, erlang)
    table = time_table(read_observations(study_dir)).splitlines()
    assert table[0] == "| t (s) | erlang users | erlang ok/s | erlang errors/s |"
    # Bins of 20 s over t = 0..216 (each step's last interval left out): t = 0 and 12 in the
    # first, whose users are 0 and 5,400 in both passes; errors from t = 156 on.
    assert table[2] == "| 0–20 | 2,700 | 500 | 0 |"
    assert table[-1] == "| 200–220 | 67,500 | 600 | 40 |"
    assert time_table([]) == ""


def test_a_run_without_errors_fails_the_errors_findings_and_holds_its_users_throughout(tmp_path):
    study_dir = tmp_path / "003"
    for pass_no in (1, 2, 3):
        write_run(tmp_path, study_dir, "erlang", pass_no, no_errors(erlang))
        write_run(tmp_path, study_dir, "apache-worker", pass_no, no_errors(apache))
    verdicts = verdicts_of(study_dir)
    assert verdicts["003-erlang-errors-in-phase-two"].status is Status.FAILS
    assert verdicts["003-erlang-errors-in-phase-two"].value == math.inf
    assert verdicts["003-apache-errors-in-phase-one"].status is Status.FAILS
    # Before the first error is the whole run: the users of the last interval count.
    assert verdicts["003-erlang-65000-concurrent"].value == erlang(paper_t(1, 9))[2]
    assert verdicts["003-erlang-65000-concurrent"].status is Status.HOLDS


def test_runs_without_a_users_column_have_no_concurrent_users(tmp_path):
    study_dir = tmp_path / "003"
    for pass_no in (1, 2, 3):
        write_run(tmp_path, study_dir, "erlang", pass_no, erlang, with_users=False)
        write_run(tmp_path, study_dir, "apache-worker", pass_no, apache, with_users=False)
    verdicts = verdicts_of(study_dir)
    for fid in ("003-concurrent-users-ratio", "003-erlang-65000-concurrent", "003-apache-concurrent-cap"):
        assert verdicts[fid].status is Status.NOT_EVALUABLE, fid
        assert "the runs have no concurrent-users figure" in verdicts[fid].reason
    assert verdicts["003-erlang-errors-in-phase-two"].status is Status.HOLDS  # the rest is still evaluated
    assert verdicts["003-erlang-plateau-150s"].status is Status.HOLDS


def test_runs_stored_before_intervals_were_kept_are_not_evaluable_over_time(tmp_path):
    study_dir = tmp_path / "003"
    stored = write_run(tmp_path, study_dir, "erlang", 1, erlang)
    (stored / INTERVALS_FILE).unlink()
    verdict = verdicts_of(study_dir)["003-erlang-errors-in-phase-two"]
    assert verdict.status is Status.NOT_EVALUABLE and "no per-interval evidence" in verdict.reason


def test_older_passes_without_intervals_count_in_no_figure_over_time(tmp_path):
    study_dir = tmp_path / "003"
    old = write_run(tmp_path, study_dir, "erlang", 1, no_errors(erlang))
    (old / INTERVALS_FILE).unlink()
    write_run(tmp_path, study_dir, "erlang", 2, erlang)
    verdict = verdicts_of(study_dir)["003-erlang-errors-in-phase-two"]
    assert (verdict.status, verdict.value) == (Status.NOT_ENOUGH_PASSES, 156)
    assert "not enough passes (1 of 3)" in verdict.reason
    assert [(p, s) for p, s, _ in verdict.passes] == [(1, Status.NOT_EVALUABLE), (2, Status.HOLDS)]
    assert verdict.passes_holding() == (1, 1)
