"""The regression gate's statistics (analysis/bootstrap.py, gatespec.py, gaterun.py, gate.py)
on synthetic run directories written by the controller's own writers (gateruns.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from controller.analysis.gateruns import PLAN, RunShape, write_run

from loadfleet.controller.analysis import bootstrap
from loadfleet.controller.analysis.gate import MIN_INTERVALS, _percentiles, judge, outcome_of
from loadfleet.controller.analysis.gaterun import plan_differences, plan_keys, read_gate_run
from loadfleet.controller.analysis.gatespec import GatedFigure, check_request_gates, parse_gate
from loadfleet.controller.model.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_THRESHOLD_FAILED, UsageError
from loadfleet.controller.model.gateresult import GateOutcome
from loadfleet.wire.histogram import Histogram

GATES = ("p99_ms:+10%", "error_pct:+0.5", "ok_rps:-5%")
FEW_RESAMPLES = 400  # enough for the verdicts these runs are built to give; keeps the tests quick


def gate(base, candidate, gates=GATES, **options):
    return judge(
        read_gate_run(base),
        read_gate_run(candidate),
        [parse_gate(g) for g in gates],
        resamples=options.pop("resamples", FEW_RESAMPLES),
        **options,
    )


def outcomes(report) -> dict[str, GateOutcome]:
    return {f.figure: f.outcome for f in report.figures}


@pytest.fixture
def base(tmp_path):
    return write_run(tmp_path / "base-run", RunShape(seed=1))


# ------------------------------------------------------------------ the bootstrap


@pytest.mark.parametrize(("n", "length"), [(0, 1), (1, 1), (8, 2), (9, 3), (27, 3), (28, 4), (3600, 16)])
def test_the_block_length_is_the_cube_root_rounded_up(n, length):
    assert bootstrap.block_length(n) == length


def test_a_resample_holds_n_intervals_in_blocks_of_consecutive_ones():
    n, length = 27, bootstrap.block_length(27)  # blocks of 3, 9 of them (none cut), 25 possible starts
    weights = bootstrap.multiplicities(np.random.default_rng(7), n, 2000)
    assert weights.shape == (2000, n) and (weights.sum(axis=1) == n).all()
    for row in weights[:50]:  # what a resample holds is made of whole blocks: runs of >= 4 intervals
        held = np.flatnonzero(row)
        runs = np.split(held, np.flatnonzero(np.diff(held) > 1) + 1)
        assert min(len(r) for r in runs) >= length
    # An interval is in as many blocks as can start within `length` before it: the first in one
    # start of 25, a middle one in 3.
    blocks, starts = 9, n - length + 1
    assert weights[:, 0].mean() == pytest.approx(blocks / starts, rel=0.1)
    assert weights[:, n // 2].mean() == pytest.approx(length * blocks / starts, rel=0.1)


def test_the_same_seed_gives_the_same_resamples_and_other_ids_others():
    def matrix(*ids):
        rng = np.random.default_rng(bootstrap.seed_of(*ids))
        return np.concatenate(list(bootstrap.chunks(rng, 50, 600)))

    assert np.array_equal(matrix("a", "b"), matrix("a", "b"))
    assert not np.array_equal(matrix("a", "b"), matrix("b", "a"))
    assert not np.array_equal(matrix("ab", "c"), matrix("a", "bc"))


def test_the_percentile_interval_is_the_2_5_and_97_5_percentiles_of_the_values():
    assert bootstrap.percentile_interval(np.arange(1, 2001, dtype=float)) == (50.0, 1950.0)


# ------------------------------------------------------------------ --gate values


@pytest.mark.parametrize(
    ("value", "figure", "tolerance", "relative"),
    [
        ("p99_ms:+10%", GatedFigure.P99_MS, 10.0, True),
        ("p99.9_ms:+5%", GatedFigure.P999_MS, 5.0, True),
        ("error_pct:+0.5", GatedFigure.ERROR_PCT, 0.5, False),
        ("ok_rps:-5%", GatedFigure.OK_RPS, 5.0, True),
        ("rps:3%", GatedFigure.RPS, 3.0, True),  # no sign: the bad direction
        ("mean_ms:0", GatedFigure.MEAN_MS, 0.0, False),
    ],
)
def test_a_gate_names_a_figure_and_its_tolerance(value, figure, tolerance, relative):
    spec = parse_gate(value)
    assert (spec.figure, spec.tolerance, spec.relative) == (figure, tolerance, relative)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("p99_ms:-10%", "p99_ms:+10%"),  # latency's bad direction is up
        ("ok_rps:+5%", "ok_rps:-5%"),  # throughput's is down
        ("error_pct:-0.5", "error_pct:+0.5"),
        ("p98_ms:+10%", "FIGURE one of"),
        ("p99_ms", "FIGURE:TOLERANCE"),
        ("p99_ms:ten%", "not a number"),
        ("p99_ms:+inf%", "finite"),
    ],
)
def test_a_bad_gate_is_a_usage_error_naming_it(value, says):
    with pytest.raises(UsageError) as raised:
        parse_gate(value)
    assert f"--gate {value}" in str(raised.value) and says in str(raised.value)


def test_percentiles_of_one_request_are_refused_its_counts_and_mean_are_not():
    with pytest.raises(UsageError, match="--gate-request login: p99_ms cannot be gated"):
        check_request_gates([parse_gate("p99_ms:+10%"), parse_gate("mean_ms:+10%")], "login")
    check_request_gates([parse_gate("mean_ms:+10%"), parse_gate("error_pct:+1")], "login")


# ------------------------------------------------------------------ the verdict


@pytest.mark.parametrize(
    ("low", "high", "worse_up", "outcome"),
    [
        (12.0, 20.0, True, GateOutcome.REGRESSION),  # wholly beyond +10
        (-3.0, 4.0, True, GateOutcome.PASS),  # the bad end inside +10
        (-30.0, -12.0, True, GateOutcome.IMPROVEMENT),  # wholly beyond -10
        (5.0, 15.0, True, GateOutcome.INCONCLUSIVE),  # straddles +10
        (-12.0, -5.0, False, GateOutcome.INCONCLUSIVE),  # throughput: straddles -10
        (-8.0, 2.0, False, GateOutcome.PASS),
        (-20.0, -11.0, False, GateOutcome.REGRESSION),
        (11.0, 25.0, False, GateOutcome.IMPROVEMENT),
        (10.0, 10.0, True, GateOutcome.PASS),  # the tolerance itself is allowed
    ],
)
def test_the_verdict_of_an_interval_against_a_tolerance_of_10(low, high, worse_up, outcome):
    assert outcome_of(low, high, 10.0, worse_up=worse_up) is outcome


# ------------------------------------------------------------------ runs


def test_identical_runs_pass(base, tmp_path):
    candidate = write_run(tmp_path / "candidate-run", RunShape(seed=1))
    report = gate(base, candidate)
    assert report.exit_code == EXIT_OK, report
    assert set(outcomes(report).values()) == {GateOutcome.PASS}
    p99 = report.figures[0]
    assert p99.change == 0 and p99.low is not None and p99.high is not None and p99.low < 0 < p99.high


def test_two_ms_more_on_every_response_of_a_5_ms_service_is_a_regression_of_p99(base, tmp_path):
    candidate = write_run(tmp_path / "candidate-run", RunShape(seed=2, extra_us=2000))
    report = gate(base, candidate)
    assert report.exit_code == EXIT_THRESHOLD_FAILED
    p99 = report.figures[0]
    assert p99.outcome is GateOutcome.REGRESSION and p99.low is not None and p99.low > 10
    assert outcomes(report)["ok_rps"] is GateOutcome.PASS  # the same throughput


def test_the_same_slowdown_read_backwards_is_an_improvement(base, tmp_path):
    slower = write_run(tmp_path / "slower-run", RunShape(seed=2, extra_us=2000))
    assert outcomes(gate(slower, base))["p99_ms"] is GateOutcome.IMPROVEMENT


def test_more_errors_are_a_regression_of_error_pct(base, tmp_path):
    candidate = write_run(tmp_path / "candidate-run", RunShape(seed=1, failed_every=50))  # 2 %
    report = gate(base, candidate)
    assert outcomes(report)["error_pct"] is GateOutcome.REGRESSION
    assert report.figures[1].candidate == pytest.approx(2.0)


def test_a_run_of_15_intervals_is_inconclusive(base, tmp_path):
    short = write_run(tmp_path / "short-run", RunShape(seed=1, intervals=15))
    report = gate(base, short)
    assert report.exit_code == EXIT_INCONCLUSIVE
    assert any("15 measured valid intervals" in r and f"the {MIN_INTERVALS}" in r for r in report.inconclusive_reasons)
    assert set(outcomes(report).values()) == {GateOutcome.INCONCLUSIVE}


def test_a_regression_between_runs_that_cannot_be_compared_is_inconclusive_not_a_failure(base, tmp_path):
    short = write_run(tmp_path / "short-run", RunShape(seed=2, intervals=15, extra_us=2000))
    report = gate(base, short)
    assert report.exit_code == EXIT_INCONCLUSIVE
    assert "the interval alone says regression" in report.figures[0].reason


def test_plans_that_differ_are_inconclusive_naming_the_key_unless_allowed(base, tmp_path):
    plan = {**PLAN, "name": "renamed", "load": {"model": "closed", "clients": 16}}
    plan["targets"] = [{"url": "http://127.0.0.9:1", "weight": 1}]  # another lab's port: not a change
    other = write_run(tmp_path / "other-run", RunShape(seed=1, plan=plan))
    report = gate(base, other)
    assert report.exit_code == EXIT_INCONCLUSIVE
    (reason,) = report.inconclusive_reasons
    assert "load.clients" in reason and "name" not in reason.replace("--allow", "") and "url" not in reason
    assert gate(base, other, allow_plan_change=True).exit_code == EXIT_OK


def test_plan_keys_leave_out_the_name_and_target_urls():
    a = plan_keys({"name": "a", "targets": [{"url": "http://x:1", "weight": 1}], "load": {"clients": 4}})
    b = plan_keys({"name": "b", "targets": [{"url": "http://y:2", "weight": 2}], "warmup_s": 5})
    assert plan_differences(a, b) == ["load.clients", "targets[0].weight", "warmup_s"]


@pytest.mark.parametrize(("invalid", "comparable"), [(4, True), (5, False)])  # of 40: 10 % is allowed
def test_more_than_a_tenth_of_a_runs_intervals_invalid_is_inconclusive(base, tmp_path, invalid, comparable):
    candidate = write_run(tmp_path / "candidate-run", RunShape(seed=1, invalid=frozenset(range(3, 3 + invalid))))
    read = read_gate_run(candidate)
    assert (read.measured, read.invalid, read.intervals.n) == (40, invalid, 40 - invalid)
    report = gate(base, candidate)
    assert (not report.inconclusive_reasons) is comparable
    assert comparable or f"{invalid} of 40 measured intervals invalid" in report.inconclusive_reasons[0]


def test_a_run_not_finished_is_inconclusive(base, tmp_path):
    stopped = write_run(tmp_path / "stopped-run", RunShape(seed=1, state="stopped"))
    report = gate(base, stopped)
    assert report.inconclusive_reasons == ("the candidate run stopped-run is stopped, not finished",)


def test_latency_of_a_run_without_an_ok_response_is_inconclusive(base, tmp_path):
    failing = write_run(tmp_path / "failing-run", RunShape(seed=1, failed_every=1))
    report = gate(base, failing)
    assert outcomes(report)["p99_ms"] is GateOutcome.INCONCLUSIVE
    assert "failing-run had no ok response" in report.figures[0].reason
    assert outcomes(report)["error_pct"] is GateOutcome.REGRESSION


def test_a_relative_tolerance_on_a_base_of_zero_is_inconclusive(base, tmp_path):
    candidate = write_run(tmp_path / "candidate-run", RunShape(seed=1))
    (figure,) = gate(base, candidate, ("error_pct:+10%",)).figures
    assert figure.outcome is GateOutcome.INCONCLUSIVE and "is 0" in figure.reason


def test_the_same_runs_give_the_same_interval(base, tmp_path):
    candidate = write_run(tmp_path / "candidate-run", RunShape(seed=3))
    first, second = gate(base, candidate), gate(base, candidate)
    assert first == second
    assert first.figures[0].low != first.figures[0].high


def test_the_warm_up_is_left_out(tmp_path):
    run = read_gate_run(write_run(tmp_path / "warm-run", RunShape(seed=1, intervals=30, warmup_intervals=5)))
    assert run.measured == 25 and run.intervals.start_ms[0] == 1_800_000_000_000 + 5000


def test_a_runs_figures_are_its_histograms_merged_exactly(base):
    run = read_gate_run(base)
    merged = Histogram.merge(
        Histogram(run.intervals.buckets[row > 0], row[row > 0].astype(np.int64)) for row in run.intervals.counts
    )
    report = judge(run, run, [parse_gate(f"{f}_ms:+1%") for f in ("p50", "p99", "p999", "mean", "max")], resamples=10)
    expected = [v / 1000 for v in merged.percentiles([50, 99, 99.9])]
    expected += [merged.mean_and_stddev()[0] / 1000, merged.max_value / 1000]
    assert [f.base for f in report.figures] == pytest.approx(expected, rel=1e-12)
    # and each resample's: the multiplicities times the buckets is the histograms added that often
    weights = bootstrap.multiplicities(np.random.default_rng(5), run.intervals.n, 1)[0]
    again = Histogram.merge(
        Histogram(run.intervals.buckets[row > 0], (row[row > 0] * w).astype(np.int64))
        for row, w in zip(run.intervals.counts, weights)
        if w
    )

    assert (
        _percentiles(weights[None, :].astype(float), run.intervals, [99.0])[0, 0] == again.percentiles([99])[0] / 1000
    )


def test_a_requests_counts_and_mean_are_its_rows_summed(base):
    login = read_gate_run(base, request="login")
    cluster = read_gate_run(base)
    assert login.intervals.requests.sum() * 2 == cluster.intervals.requests.sum()
    assert login.intervals.buckets is None
    mean = login.intervals.latency_sum_ms.sum() / login.intervals.responses.sum()
    assert 5.0 < mean < 6.0


def test_an_unknown_request_names_the_known_ones(base):
    with pytest.raises(UsageError, match=r"no request named 'logout' \(its requests: home, login\)"):
        read_gate_run(base, request="logout")


def test_a_run_directory_without_a_summary_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"no summary\.json"):
        read_gate_run(tmp_path)


def test_a_damaged_histogram_log_names_the_line(base):
    hlog = base / "latency.hlog"
    lines = hlog.read_text().splitlines()
    assert lines[3].startswith("Tag=cluster,")
    lines[3] = lines[3][:-12] + "AAAA"
    hlog.write_text("\n".join(lines) + "\n")
    with pytest.raises(UsageError, match=r"latency.hlog:4: not a histogram log line"):
        read_gate_run(base)


def test_a_plan_yaml_that_is_not_yaml_is_a_usage_error(base):
    (base / "plan.yaml").write_text("load: [unclosed\n")
    with pytest.raises(UsageError, match=r"plan\.yaml: unreadable"):
        read_gate_run(base)
    assert yaml  # the writer above used it


def test_a_summary_without_steps_has_every_interval_measured(tmp_path):
    run_dir = write_run(tmp_path / "old-run", RunShape(seed=1, intervals=30, warmup_intervals=5))
    summary = run_dir / "summary.json"
    doc = json.loads(summary.read_text())
    summary.write_text(json.dumps({**doc, "steps": []}))
    assert read_gate_run(run_dir).measured == 30
