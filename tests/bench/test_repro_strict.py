"""bench/repro's strict evaluator (issue 34, item 2): each rule tripped by observations built to
trip it, and left alone by ones that do not. Synthetic observations and files, no runs."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from bench.repro.reprokit import runner
from bench.repro.reprokit.design import design_flags
from bench.repro.reprokit.evaluate import Observation, scrutinised_metric
from bench.repro.reprokit.evidence import (
    cell_failure,
    invalid_reason,
    read_observations,
    step_observation,
    store_run,
    stored_runs,
)
from bench.repro.reprokit.findings import Finding
from bench.repro.reprokit.intervals import IntervalRow
from bench.repro.reprokit.late import Late, Source, from_intervals, from_totals, strict_error_pct
from bench.repro.reprokit.strict import MAX_REASONS_SHOWN, Scrutiny
from bench.repro.reprokit.studies import STUDIES
from bench.repro.reprokit.tables import study_tables
from bench.repro.reprokit.verdicts import MIN_PASSES, Status, confidence_interval, evaluate_findings

REDUCTION = "reduction(mean_ms[setup=varnish,users=max], mean_ms[setup=haproxy,users=max])"  # varnish's cut


def finding(metric, comparison, threshold):
    return Finding("001", "001-x", "t", metric, comparison, threshold, "direction", "relative", "yes")


def step_obs(setup, users, mean_ms, pass_no=1, **flags):
    figures = {"mean_ms": mean_ms, "error_pct": 0.0, "load_s": 10.0, "window_s": 4.0, "request_timeout_s": 10.0}
    return Observation({"setup": setup, "users": users}, figures, pass_no, f"r-{setup}-{pass_no}", **flags)


def lb(pass_no=1, varnish=1.0, haproxy=10.0):
    return [
        step_obs(setup, users, base * users / 1000, pass_no)
        for setup, base in (("varnish", varnish), ("haproxy", haproxy))
        for users in (1000, 3000)
    ]


def judged(metric, comparison, threshold, observations):
    return evaluate_findings([finding(metric, comparison, threshold)], observations)[0]


# -- a step that measured nothing under load fails its cell ----------------------------------------


def test_a_step_with_no_request_under_load_fails_its_cell():
    step = {"name": "s1", "requests": 0, "offered": 1000.0, "concurrent_conns": 1000.0}
    assert cell_failure(step) == "step s1 measured 0 requests with 1000 offered, 1000 connections open"
    assert cell_failure({**step, "requests": 5}) == ""
    assert cell_failure({**step, "offered": 0.0}) == ""  # nothing offered: left out, not failed
    assert step_observation({}, {**step, "state": "finished"}).fails_cell


def test_a_cell_with_a_zero_request_step_fails_the_finding_instead_of_being_left_out():
    rows = [o for p in (1, 2, 3) for o in lb(p)]
    assert judged(REDUCTION, ">=", 0.5, rows).status is Status.HOLDS
    dead = replace(rows[0], figures={**rows[0].figures, "mean_ms": 0.0}, fails_cell="step s2 measured 0 requests")
    dead = replace(dead, vars={"setup": "varnish", "users": 3000})
    result = judged(REDUCTION, ">=", 0.5, [*rows, dead])
    assert result.status is Status.FAILS
    assert "a cell failed" in result.reason and "measured 0 requests" in result.reason
    # A cell the metric does not read is not failed by it.
    other = replace(dead, vars={"setup": "apache", "users": 3000})
    assert judged(REDUCTION, ">=", 0.5, [*rows, other]).status is Status.HOLDS


# -- invalid steps are excluded and counted --------------------------------------------------------


def test_invalid_steps_are_excluded_from_figures_and_counted_in_the_verdict():
    assert invalid_reason({"validity": "invalid", "validity_reasons": "generator-bound"}) == "invalid: generator-bound"
    assert invalid_reason({"validity": "suspect"}) == ""
    assert step_observation({}, {"name": "s1", "validity": "invalid"}).invalid
    rows = [o for p in (1, 2, 3) for o in lb(p)]
    # An invalid varnish step at the top level that would break the finding if it were used.
    bad = replace(rows[1], figures={**rows[1].figures, "mean_ms": 1e6}, invalid="invalid: generator-bound")
    value, scrutiny = scrutinised_metric(REDUCTION, [*rows, bad])
    assert value == pytest.approx(0.9)
    assert scrutiny.text() == "1 of 7 steps invalid, excluded (invalid: generator-bound)"
    result = judged(REDUCTION, ">=", 0.5, [*rows, bad])
    assert result.status is Status.HOLDS and "1 of 7 steps invalid, excluded" in result.reason
    assert "invalid" not in judged(REDUCTION, ">=", 0.5, rows).reason


def test_a_level_whose_steps_are_all_invalid_is_not_replaced_by_a_lower_one():
    rows = [o for p in (1, 2, 3) for o in lb(p)]
    marked = [replace(o, invalid="invalid: too few intervals") if o.vars["users"] == 3000 else o for o in rows]
    result = judged(REDUCTION, ">=", 0.5, marked)
    assert result.status is Status.NOT_EVALUABLE and "is invalid" in result.reason


# -- failures after a window are attributed to their step ------------------------------------------


def test_failures_after_the_windows_are_attributed_from_the_run_totals():
    steps = [
        {"name": "s1", "requests": 100, "error_pct": 10.0},
        {"name": "s2", "requests": 200, "error_pct": 0.0},
    ]
    late = from_totals({"steps": steps, "total": {"figures": {"failed": 60}}})
    assert late == {"s1": Late(50.0, Source.TOTALS), "s2": Late(50.0, Source.TOTALS)}  # 60 - 10 in windows
    assert from_totals({"steps": steps, "total": {"figures": {"failed": 10}}})["s1"].failed == 0
    assert strict_error_pct(steps[1], late["s2"]) == pytest.approx(100 * 50 / 250)
    assert strict_error_pct(steps[0], None) == 10.0


def row(start_ms, failed):
    return IntervalRow(start_ms, 1000, 10, 10 - failed, failed, 10.0, 1.0, 1.0, 5, None, "valid")


def test_failures_after_the_windows_are_attributed_from_the_intervals():
    # Two steps of 4 s windows from 10 s and 20 s (warm-up 2 s: the second's load from 18 s).
    steps = [{"name": "s1", "start_ms": 10_000, "measured_s": 4}, {"name": "s2", "start_ms": 20_000, "measured_s": 4}]
    rows = [row(13_000, 7), row(14_000, 3), row(17_000, 2), row(18_000, 5), row(24_000, 4), row(30_000, 1)]
    late = from_intervals({"steps": steps}, {"sweep": {"warmup_s": 2}}, rows)
    # s1: 14 s and 17 s (13 s is in its window, 18 s is s2's warm-up); s2: from 24 s to the end.
    assert late == {"s1": Late(5.0, Source.INTERVALS), "s2": Late(5.0, Source.INTERVALS)}


def test_a_step_counts_its_late_failures_in_its_error_figure():
    step = {"name": "s1", "requests": 900, "error_pct": 0.0, "offered": 10.0}
    observation = step_observation({}, step, late=Late(100.0, Source.TOTALS))
    assert observation.figures["error_pct"] == pytest.approx(10.0)
    assert observation.figures["window_error_pct"] == 0.0 and observation.figures["late_failed"] == 100.0


# -- verdicts per pass ------------------------------------------------------------------------------


def test_fewer_than_three_passes_never_hold():
    assert MIN_PASSES == 3
    two = [o for p in (1, 2) for o in lb(p)]
    result = judged(REDUCTION, ">=", 0.5, two)
    assert result.status is Status.NOT_ENOUGH_PASSES
    assert result.reason.startswith("not enough passes (2 of 3); holds in 2 of 2 passes")
    three = [*two, *lb(3)]
    assert judged(REDUCTION, ">=", 0.5, three).status is Status.HOLDS


def test_a_pass_that_fails_fails_the_finding_unless_the_passes_interval_excludes_the_threshold():
    # Passes at 0.9, 0.9, 0.9, 0.45: the mean (0.79) holds, one pass does not, the interval spans 0.5.
    rows = [o for p in (1, 2, 3) for o in lb(p)] + lb(4, varnish=5.5)
    result = judged(REDUCTION, ">=", 0.5, rows)
    assert result.status is Status.FAILS and "holds in 3 of 4 passes" in result.reason
    # Passes at 0.62, 0.6, 0.58, 0.49: one fails and the passes' interval reaches below 0.5.
    tight = [o for p, v in ((1, 3.8), (2, 4.0), (3, 4.2), (4, 5.1)) for o in lb(p, varnish=v)]
    low, high = confidence_interval([0.62, 0.6, 0.58, 0.49])
    assert low < 0.5 < high  # this spread does not exclude 0.5: the finding fails
    assert judged(REDUCTION, ">=", 0.5, tight).status is Status.FAILS
    # Ten passes at 0.7 and one at 0.49: the interval lies above 0.5, the odd pass is noise.
    many = [o for p in range(1, 11) for o in lb(p, varnish=3.0)] + lb(11, varnish=5.1)
    low, _ = confidence_interval([0.7] * 10 + [0.49])
    assert low > 0.5
    result = judged(REDUCTION, ">=", 0.5, many)
    assert result.status is Status.HOLDS and "holds in 10 of 11 passes" in result.reason
    assert "95 % interval" in result.reason


def test_the_interval_needs_two_finite_values():
    assert confidence_interval([1.0]) is None
    assert confidence_interval([1.0, math.inf]) is None
    low, high = confidence_interval([1.0, 3.0])
    assert low < 2.0 < high and high - 2.0 == pytest.approx(12.706)


# -- predicates the design decides ---------------------------------------------------------------


def test_a_latency_longer_than_any_step_can_record_is_flagged():
    rows = [o for p in (1, 2, 3) for o in lb(p)]
    short = [replace(o, figures={**o.figures, "load_s": 4.0}) for o in rows]
    (flag,) = design_flags(finding("max(mean_ms[setup=varnish])", ">=", 8000), short)
    assert flag.startswith("cannot pass by design: mean_ms >= 8000 ms") and "at most 4000 ms" in flag
    (flag,) = design_flags(finding("max(mean_ms[setup=varnish])", "<", 8000), short)
    assert flag.startswith("cannot fail by design")
    assert design_flags(finding("max(mean_ms[setup=varnish])", ">=", 3000), short) == []
    assert design_flags(finding(REDUCTION, ">=", 0.5), short) == []  # a ratio is not bounded
    # The request timeout bounds it too: 10 s steps, 2 s timeout.
    capped = [replace(o, figures={**o.figures, "request_timeout_s": 2.0}) for o in rows]
    assert "at most 2000 ms" in design_flags(finding("mean_ms[setup=varnish,users=max]", ">", 5000), capped)[0]
    result = judged("max(mean_ms[setup=varnish])", ">=", 8000, short)
    assert result.status is Status.FAILS and "cannot pass by design" in result.reason


def test_errors_in_windows_that_close_before_any_timeout_are_flagged():
    rows = [o for p in (1, 2, 3) for o in lb(p)]  # 10 s timeout, 10 s steps
    metric = "diff(error_pct[setup=haproxy,users=max], error_pct[setup=varnish,users=max])"
    (flag,) = design_flags(finding(metric, ">", 0), rows)
    assert flag.startswith("cannot pass by design in the windows alone: the request timeout (10 s)")
    assert design_flags(finding("max(error_pct[setup=varnish])", "<=", 1), rows)[0].startswith("cannot fail")
    quick = [replace(o, figures={**o.figures, "request_timeout_s": 3.0}) for o in rows]
    assert design_flags(finding(metric, ">", 0), quick) == []


# -- before each cell: the machine's idle share, the generator pinned ------------------------------


def test_the_generator_runs_pinned_and_is_refused_unpinned(monkeypatch):
    options = runner.RunOptions(repo=None, evidence_dir=None, work_dir=None)
    monkeypatch.setattr(runner.shutil, "which", lambda name: f"/bin/{name}")
    assert runner._niced(["loadfleet"], options, "0") == ["nice", "-n", "5", "taskset", "-c", "0", "loadfleet"]
    assert runner._niced(["loadfleet"], options) == ["nice", "-n", "5", "loadfleet"]
    monkeypatch.setattr(runner.shutil, "which", lambda name: None)
    with pytest.raises(runner.RunnerError, match="pinned to CPU"):
        runner._niced(["loadfleet"], options, "0")


def test_every_study_pins_its_generator():
    assert all(study.generator_cpus for study in STUDIES.values())


def test_the_idle_share_before_a_cell_is_a_percentage(monkeypatch):
    samples = iter([(100, 1000), (150, 1100)])  # 50 idle jiffies of 100
    monkeypatch.setattr(runner, "_cpu_times", lambda: next(samples))
    assert runner.idle_before(0) == pytest.approx(50.0)
    monkeypatch.setattr(runner, "_cpu_times", lambda: None)
    assert runner.idle_before(0) is None


def test_a_figure_over_a_client_sweep_needs_every_level_of_it():
    rows = [
        Observation({"server": "nginx", "cpus": k, "clients": c}, {"ok_rps": r}, p, f"r{p}")
        for p in (1, 2, 3)
        for k, c, r in ((1, 1, 100.0), (1, 16, 300.0), (8, 1, 400.0), (8, 16, 1600.0))
    ]
    metric = "ratio(avg_ok_rps[cpus=8], avg_ok_rps[cpus=1]) @ each server"
    assert judged(metric, ">=", 4, rows).status is Status.HOLDS  # (400 + 1600) / (100 + 300) = 5
    # Clients=16 at 8 CPUs invalid in every pass: the average over clients=1 alone (4.0) is no answer.
    marked = [
        replace(o, invalid="invalid: generator-bound") if o.vars["cpus"] == 8 and o.vars["clients"] == 16 else o
        for o in rows
    ]
    result = judged(metric, ">=", 4, marked)
    assert result.status is Status.NOT_EVALUABLE and "only invalid steps ran at clients=16, cpus=8" in result.reason
    # Invalid in one pass only: the other passes still have the level.
    one = [replace(o, invalid="invalid: x") if o.pass_no == 1 and o.vars == marked[3].vars else o for o in rows]
    assert judged(metric, ">=", 4, one).status is not Status.NOT_EVALUABLE


def test_a_verdict_quotes_at_most_two_reasons_for_invalid_steps():
    assert MAX_REASONS_SHOWN == 2
    scrutiny = Scrutiny(
        read={1, 2, 3, 4}, invalid={1, 2, 3}, invalid_reasons={"invalid: a", "invalid: b", "invalid: c"}
    )
    assert scrutiny.text() == "3 of 4 steps invalid, excluded (invalid: a; invalid: b; 1 more)"
    two = Scrutiny(read={1, 2}, invalid={1}, invalid_reasons={"invalid: a"})
    assert two.text() == "1 of 2 steps invalid, excluded (invalid: a)"
    assert Scrutiny(read={1}).text() == ""


def test_the_tables_show_invalid_dead_and_late_steps_and_what_each_cell_ran_beside(tmp_path):
    def step(name, level, requests, **extra):
        base = {"name": name, "level_index": level, "offered": 1000.0, "state": "finished", "requests": requests}
        return {**base, "mean_ms": 2.0, "p99_ms": 5.0, "error_pct": 0.0, "ok_rps": 50.0, **extra}

    run_dir = tmp_path / "runs" / "run-1"
    run_dir.mkdir(parents=True)
    steps = [step("s1", 1, 0, concurrent_conns=1000.0), step("s2", 2, 100, validity="invalid", validity_reasons="x")]
    summary = {"state": "finished", "steps": steps, "total": {"figures": {"failed": 7}}}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    record = {
        "study": "001",
        "cell": "varnish-php",
        "vars": {"setup": "varnish"},
        "pass": 1,
        "run_id": "run-1",
        "level_vars": ["users"],
        "levels": [{"users": 1000}, {"users": 3000}],
        "started_utc": "2026-11-28T13:00:00Z",
        "loadavg_1m": 1.5,
        "idle_pct_before": 87.0,
        "servers_before": "not restarted; idle share recorded",  # as runs stored before restarts say
        "generator_cpus": "0",
    }
    store_run(run_dir, tmp_path / "001", record)
    observations = read_observations(tmp_path / "001")
    assert [o.figures["late_failed"] for o in observations] == [7.0, 7.0]  # from the totals: 7 - 0
    markdown = study_tables("001", "t", stored_runs(tmp_path / "001"), [], "", observations, tmp_path / "001")
    assert "| varnish-php | users=1000 | 0 of 1 |" in markdown
    assert markdown.count("| 0 | 0 | 1 | 7 |") == 1  # users=1000: no request under load, 7 failed after
    assert markdown.count("| 0 | 1 | 0 | 7 |") == 1  # users=3000: invalid, excluded
    assert "| 1.5 | 87 | not restarted; idle share recorded | 0 | finished | 2 |" in markdown


def test_steps_that_lost_an_engine_after_their_window_are_counted_in_the_verdict():
    rows = [o for p in (1, 2, 3) for o in lb(p)]
    lost = replace(rows[1], figures={**rows[1].figures, "lost_after_window": 1.0})
    result = judged(REDUCTION, ">=", 0.5, [lost, *rows[:1], *rows[2:]])
    assert result.status is Status.HOLDS  # its window's figures are used
    assert "1 of 6 steps lost an engine after their window" in result.reason
    assert "lost an engine" not in judged(REDUCTION, ">=", 0.5, rows).reason
