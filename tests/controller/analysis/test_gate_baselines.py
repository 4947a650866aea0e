"""The regression gate against several baseline runs (analysis/gate.py judge_runs,
analysis/baselines.py, bootstrap.two_level_chunks): the interval takes in the variance between
runs when the baselines show it and not when they are alike; one baseline is the two-run gate."""

from __future__ import annotations

import numpy as np
import pytest
from controller.analysis.gateruns import PLAN, RunShape, write_run

from loadfleet.controller.analysis import baselines, bootstrap
from loadfleet.controller.analysis.gate import _figures, judge, judge_runs
from loadfleet.controller.analysis.gaterun import read_gate_run
from loadfleet.controller.analysis.gatespec import GatedFigure, parse_gate
from loadfleet.controller.model.gateresult import GateOutcome

FEW_RESAMPLES = 400  # as test_gate.py: enough for these runs' verdicts, quick
P90 = [parse_gate("p90_ms:+10%")]
SPREAD_US = 300  # the baselines' service levels differ by ±6 % of 5 ms between runs (a machine's drift)


def runs(root, name, levels_us, seed=10):
    return [
        read_gate_run(write_run(root / f"{name}-{i}", RunShape(seed=seed + i, base_us=u)))
        for i, u in enumerate(levels_us)
    ]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("baselines")
    return {
        "alike": runs(root, "alike", [5000, 5000, 5000]),
        "apart": runs(root, "apart", [5000 - SPREAD_US, 5000, 5000 + SPREAD_US]),
        "candidate": runs(root, "candidate", [5000], seed=50)[0],
    }


def width(report) -> float:
    figure = report.figures[0]
    assert figure.low is not None and figure.high is not None
    return figure.high - figure.low


def test_baselines_that_differ_widen_the_interval_and_alike_ones_do_not(lab):
    one = width(judge(lab["alike"][0], lab["candidate"], P90, resamples=FEW_RESAMPLES))
    alike = width(judge_runs(lab["alike"], lab["candidate"], P90, resamples=FEW_RESAMPLES))
    apart = width(judge_runs(lab["apart"], lab["candidate"], P90, resamples=FEW_RESAMPLES))
    assert alike < 1.3 * one  # no spread between runs to add: about the one-baseline interval
    assert apart > 2 * alike  # ±6 % between runs against an interval of a few points within one


def test_a_change_within_the_baselines_spread_is_not_called_a_pass_with_false_confidence(lab):
    report = judge_runs(lab["apart"], lab["candidate"], P90, resamples=FEW_RESAMPLES)
    figure = report.figures[0]
    assert figure.low is not None and figure.high is not None
    assert figure.low < figure.change < figure.high  # type: ignore[operator]


@pytest.mark.parametrize(("tau", "close_to"), [(0.0, 0.0), (0.05, 0.05), (0.10, 0.10)])
def test_the_between_run_spread_is_estimated_from_runs_of_a_known_spread(tau, close_to):
    rng = np.random.default_rng(7)
    runs_n, within_sd = 400, 0.02
    offsets = tau * rng.standard_normal(runs_n)
    resampled = [a + within_sd * rng.standard_normal(500) for a in offsets]  # a run's bootstrap values
    points = np.array([a + within_sd * rng.standard_normal() for a in offsets])  # its figure: offset + noise
    assert baselines.between_run_sd(points, resampled) == pytest.approx(close_to, abs=0.012)


def test_one_run_gives_no_between_run_spread():
    assert np.isnan(baselines.between_run_sd(np.array([1.0]), [np.ones(3)]))


def test_a_two_level_resample_draws_whole_runs_and_blocks_within_them():
    sizes = [30, 40, 50]
    weights = np.concatenate(list(bootstrap.two_level_chunks(np.random.default_rng(3), sizes, 300)))
    assert weights.shape == (300, sum(sizes))
    per_run = np.stack([weights[:, :30].sum(1), weights[:, 30:70].sum(1), weights[:, 70:].sum(1)], axis=1)
    assert (per_run % np.array(sizes) == 0).all()  # each run drawn a whole number of times
    assert ((per_run // np.array(sizes)).sum(1) == 3).all()  # 3 runs drawn in every row
    assert (per_run == 0).any()  # with replacement: some rows leave a run out


def test_one_baseline_is_the_two_run_gate_with_its_limit_said(lab):
    base, candidate = lab["alike"][0], lab["candidate"]
    report = judge_runs([base], candidate, P90, resamples=FEW_RESAMPLES)
    seeds = bootstrap.seed_of(base.run_id, candidate.run_id).spawn(2)
    values = [
        _figures(r, [GatedFigure.P90_MS], np.random.default_rng(s), FEW_RESAMPLES)
        for r, s in zip((base, candidate), seeds)
    ]
    b, c = (v[GatedFigure.P90_MS].resampled for v in values)
    assert (report.figures[0].low, report.figures[0].high) == bootstrap.percentile_interval(100 * (c - b) / b)
    assert report.method.startswith("1 baseline run: between-run variance not included")
    assert report.base_run == base.run_id


def test_the_report_names_every_baseline_and_their_number(lab):
    report = judge_runs(lab["apart"], lab["candidate"], P90, resamples=FEW_RESAMPLES)
    assert report.base_run == ", ".join(r.run_id for r in lab["apart"])
    assert report.method.startswith("3 baseline runs: between-run variance included")
    assert report == judge_runs(lab["apart"], lab["candidate"], P90, resamples=FEW_RESAMPLES)  # seeded


def test_a_baseline_of_another_plan_is_refused_naming_it(lab, tmp_path):
    other = read_gate_run(
        write_run(tmp_path / "replanned", RunShape(plan={**PLAN, "load": {"model": "closed", "clients": 16}}))
    )
    report = judge_runs([*lab["alike"][:2], other], lab["candidate"], P90, resamples=FEW_RESAMPLES)
    assert report.figures[0].outcome is GateOutcome.INCONCLUSIVE
    (reason,) = report.inconclusive_reasons
    assert "load.clients" in reason and f"runs replanned and {lab['candidate'].run_id}" in reason


def test_a_short_baseline_is_named(lab, tmp_path):
    short = read_gate_run(write_run(tmp_path / "short", RunShape(intervals=15)))
    report = judge_runs([*lab["alike"][:2], short], lab["candidate"], P90, resamples=FEW_RESAMPLES)
    assert any(r.startswith("the baseline run short has 15") for r in report.inconclusive_reasons)
