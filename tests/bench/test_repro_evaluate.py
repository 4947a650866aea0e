"""bench/repro's evaluator: findings' metrics against synthetic observations (no runs, no I/O).
Each comparison kind holds and fails; a finding whose data is missing is not evaluable, with why."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from bench.repro.reprokit.evaluate import Grain, NotEvaluable, Observation, evaluate_metric
from bench.repro.reprokit.findings import Finding, load_findings
from bench.repro.reprokit.metric import MetricSyntaxError, parse_metric
from bench.repro.reprokit.verdicts import Status, compare, evaluate_findings, format_value
from support.procs import REPO


def obs(pass_no=1, **values):
    figures = {k: values.pop(k) for k in list(values) if k.endswith(("_ms", "_pct", "_rps")) or k == "generator_bound"}
    return Observation(vars=values, figures=figures, pass_no=pass_no)


def finding(metric, comparison, threshold, fid="001-test"):
    return Finding(
        study=fid[:3],
        id=fid,
        text="t",
        metric=metric,
        comparison=comparison,
        threshold=threshold,
        threshold_basis="direction",
        kind="relative",
        reproducible_here="yes",
    )


def lb_study(varnish_static=1.0, haproxy_static=10.0, pass_no=1):
    """Study 001 in miniature: three setups, two pages, two (users, spawn_rate) levels."""
    rows = []
    for setup, base in (("apache", 2.0), ("haproxy", haproxy_static), ("varnish", varnish_static)):
        for page, factor in (("static", 1.0), ("php", 5.0)):
            for users, spawn, load in ((1000, 250, 1.0), (4000, 800, 3.0)):
                rows.append(
                    obs(
                        pass_no,
                        setup=setup,
                        page=page,
                        users=users,
                        spawn_rate=spawn,
                        mean_ms=base * factor * load,
                        ok_rps=users / 7.5 / load,
                        error_pct=0.0,
                        generator_bound=0.0,
                    )
                )
    return rows


def three_passes(observations):
    """The observations as three identical passes: a finding needs 3 before it can hold."""
    return [replace(o, pass_no=p) for p in (1, 2, 3) for o in observations]


def verdict(metric, comparison, threshold, observations):
    """The verdict over the observations, repeated as three passes when they are one pass."""
    if len({o.pass_no for o in observations}) == 1:
        observations = three_passes(observations)
    return evaluate_findings([finding(metric, comparison, threshold)], observations)[0]


STATIC_REDUCTION = (
    "reduction(mean_ms[setup=varnish,page=static,users=max,spawn_rate=max], "
    "mean_ms[setup=haproxy,page=static,users=max,spawn_rate=max])"
)


@pytest.mark.parametrize(
    "comparison, threshold, expected",
    [
        (">=", 0.5, Status.HOLDS),
        (">=", 0.95, Status.FAILS),
        (">", 0.89, Status.HOLDS),
        (">", 0.9, Status.FAILS),
        ("<", 0.95, Status.HOLDS),
        ("<", 0.5, Status.FAILS),
        ("<=", 0.9, Status.HOLDS),
        ("<=", 0.8, Status.FAILS),
        ("between", (0.8, 0.95), Status.HOLDS),
        ("between", (0.0, 0.5), Status.FAILS),
        ("==", 0.9, Status.HOLDS),
        ("==", 0.8, Status.FAILS),
    ],
)
def test_each_numeric_comparison_holds_or_fails(comparison, threshold, expected):
    result = verdict(STATIC_REDUCTION, comparison, threshold, lb_study(varnish_static=1.0, haproxy_static=10.0))
    assert result.value == pytest.approx(0.9)
    assert result.status is expected


@pytest.mark.parametrize(
    "metric, threshold, expected",
    [
        ("argmax(mean_ms[page=static,users=max,spawn_rate=max], over=setup)", "haproxy", Status.HOLDS),
        ("argmin(mean_ms[page=php,users=max,spawn_rate=max], over=setup)", "varnish", Status.HOLDS),
        ("argmax(mean_ms[page=php,users=max,spawn_rate=max], over=setup)", "apache", Status.FAILS),
    ],
)
def test_a_name_comparison(metric, threshold, expected):
    assert verdict(metric, "==", threshold, lb_study()).status is expected


def test_missing_data_is_not_evaluable_and_says_why():
    result = verdict("argmin(mean_ms[requests=10000..30000], over=server) @ each requests", "==", "varnish", lb_study())
    assert result.status is Status.NOT_EVALUABLE
    assert "no variable 'requests'" in result.reason
    no_figure = verdict("max(concurrent_users[setup=varnish])", "<=", 4500, lb_study())
    assert no_figure.status is Status.NOT_EVALUABLE and "concurrent_users" in no_figure.reason
    no_cell = verdict(
        "ratio(mean_ms[setup=iis,page=static,users=max], mean_ms[setup=haproxy,page=static,users=max])",
        ">",
        1,
        lb_study(),
    )
    assert no_cell.status is Status.NOT_EVALUABLE and "setup=iis" in no_cell.reason
    assert evaluate_findings([finding(STATIC_REDUCTION, ">=", 0.5)], [])[0].reason == "no stored runs"


def test_naming_the_best_of_a_cell_the_runs_lack_is_not_evaluable():
    """Without IIS the runs' best is some other setup: that does not say IIS is not the best."""
    absent = verdict("argmax(mean_ms[page=static,users=max], over=setup)", "==", "iis", lb_study())
    assert absent.status is Status.NOT_EVALUABLE and "'iis'" in absent.reason
    present = verdict("argmax(mean_ms[page=static,users=max], over=setup)", "==", "varnish", lb_study())
    assert present.status in (Status.HOLDS, Status.FAILS)


def test_a_selector_that_leaves_cells_open_is_not_evaluable():
    result = verdict(
        "ratio(mean_ms[setup=varnish,page=static], mean_ms[setup=haproxy,page=static])", "<", 1, lb_study()
    )
    assert result.status is Status.NOT_EVALUABLE
    assert "leaves 2 cells open" in result.reason and "users" in result.reason


def test_slope_over_a_variable_at_each_level_of_another():
    metric = "slope(mean_ms[page=static], over=users) @ each setup"
    result = verdict(metric, ">", 0, lb_study())
    assert result.status is Status.HOLDS
    assert set(result.value) == {"apache", "haproxy", "varnish"}
    one_level = [o for o in lb_study() if o.vars["users"] == 4000]
    flat = verdict(metric, ">", 0, one_level)
    assert flat.status is Status.NOT_EVALUABLE and "two numeric levels" in flat.reason


def test_at_each_must_hold_at_every_level():
    rows = [
        obs(server=s, requests=r, error_pct=e)
        for s, r, e in (("apache", 10, 0.0), ("nginx", 10, 0.5), ("apache", 20, 1.0), ("nginx", 20, 0.2))
    ]
    result = verdict("diff(error_pct[server=apache], error_pct[server=nginx]) @ each requests", "<=", 0, rows)
    assert result.value == {"10": pytest.approx(-0.5), "20": pytest.approx(0.8)}
    assert result.status is Status.FAILS


def test_each_may_be_nested_and_must_hold_at_every_pair_of_levels():
    rows = [
        obs(server=s, requests=r, design=d, error_pct=e + (1.0 if (d, s, r) == ("growing", "apache", 20) else 0.0))
        for d in ("fixed", "growing")
        for s, r, e in (("apache", 10, 0.0), ("nginx", 10, 0.5), ("apache", 20, 0.0), ("nginx", 20, 0.2))
    ]
    metric = "diff(error_pct[server=apache], error_pct[server=nginx]) @ each requests @ each design"
    result = verdict(metric, "<=", 0, rows)
    assert result.value == {
        "fixed": {"10": pytest.approx(-0.5), "20": pytest.approx(-0.2)},
        "growing": {"10": pytest.approx(-0.5), "20": pytest.approx(0.8)},
    }
    assert result.status is Status.FAILS
    assert format_value(result.value).startswith("fixed: (10: -0.5, 20: -0.2), growing: (10: -0.5, ")


def test_growth_onset_and_derived_client_sweep_figures():
    rows = [
        obs(server=s, requests=r, stddev_ms=v)
        for s, r, v in (("apache", 50000, 2.0), ("apache", 70000, 8.0), ("nginx", 50000, 2.0), ("nginx", 70000, 3.0))
    ]
    growth = (
        "ratio(growth(stddev_ms[server=apache], requests=50000->70000), "
        "growth(stddev_ms[server=nginx], requests=50000->70000))"
    )
    assert evaluate_metric(growth, rows) == pytest.approx(4.0 / 1.5)
    files = [
        obs(scenario=s, clients=c, mean_ms=m)
        for s, c, m in (
            ("a", 10, 1.0),
            ("a", 50, 1.5),
            ("a", 200, 3.0),
            ("b", 10, 1.0),
            ("b", 50, 2.5),
            ("b", 200, 9.0),
        )
    ]
    assert evaluate_metric(
        "ratio(onset(mean_ms[scenario=b], over=clients), onset(mean_ms[scenario=a], over=clients))", files
    ) == pytest.approx(50 / 200)
    nodes = [
        obs(server="nginx", cpus=k, clients=c, ok_rps=r)
        for k, c, r in ((1, 1, 100.0), (1, 16, 300.0), (8, 1, 400.0), (8, 16, 1600.0))
    ]
    assert evaluate_metric("ratio(avg_ok_rps[cpus=8], avg_ok_rps[cpus=1]) @ each server", nodes) == {"nginx": 5.0}
    assert evaluate_metric("ratio(avg_ok_rps[cpus=8], 8 * avg_ok_rps[cpus=1])", nodes) == pytest.approx(0.625)
    assert evaluate_metric("slope(max_ok_rps[server=nginx]/cpus, over=cpus)", nodes) < 0


def test_a_cell_is_the_mean_of_its_passes_and_a_pass_that_fails_fails_the_finding():
    rows = lb_study(varnish_static=1.0, haproxy_static=10.0, pass_no=1) + lb_study(
        varnish_static=9.0, haproxy_static=10.0, pass_no=2
    )
    result = verdict(STATIC_REDUCTION, ">=", 0.5, rows)
    assert result.value == pytest.approx(0.5)  # the means over the passes would hold
    assert result.status is Status.FAILS  # but pass 2 (0.1) does not: 1 of 2 is no reproduction
    assert result.passes_holding() == (1, 2) and "holds in 1 of 2 passes" in result.reason


def test_per_interval_selectors_are_not_evaluable_from_steps():
    rows = [obs(server="erlang", rate=500, ok_rps=500.0)]
    result = verdict("ratio(mean(ok_rps[server=erlang,t=150..240]), max(ok_rps[server=erlang,t=0..150]))", "<", 1, rows)
    assert result.status is Status.NOT_EVALUABLE and "'t'" in result.reason


@pytest.mark.parametrize(
    "value, comparison, threshold, holds",
    [
        ({"a": 1.0, "b": 3.0}, ">", 0, True),
        ({"a": 1.0, "b": -3.0}, ">", 0, False),
        ("IIS", "==", "iis", True),
        (float("nan"), "<", 1, False),
    ],
)
def test_compare(value, comparison, threshold, holds):
    assert compare(value, comparison, threshold) is holds


def test_every_metric_of_the_findings_file_parses():
    findings = load_findings(REPO / "docs" / "reproductions" / "findings.yaml")
    assert len(findings) >= 40
    for f in findings:
        parse_metric(f.metric)


@pytest.mark.parametrize("bad", ["ratio(mean_ms[a=1]", "frobnicate(x[a=1])", "mean_ms[a=]", "x[a=1] @ every b"])
def test_a_malformed_metric_is_a_syntax_error(bad):
    with pytest.raises(MetricSyntaxError):
        parse_metric(bad)
    assert evaluate_findings([finding(bad, "<", 1)], lb_study())[0].status is Status.NOT_EVALUABLE


def test_a_division_by_zero_is_not_evaluable():
    rows = [obs(setup="a", error_pct=0.0), obs(setup="b", error_pct=0.0)]
    with pytest.raises(NotEvaluable):
        evaluate_metric("ratio(error_pct[setup=a], error_pct[setup=b])", rows)


def test_max_is_the_largest_level_of_the_study_not_of_the_cell():
    """A cell whose largest level failed is not compared at a smaller level than the others."""
    rows = [o for o in lb_study() if not (o.vars["setup"] == "varnish" and o.vars["users"] == 4000)]
    result = verdict(STATIC_REDUCTION, ">=", 0.5, rows)
    assert result.status is Status.NOT_EVALUABLE
    assert "setup=varnish, page=static, users=max (users=max is 4000)" in result.reason
    slope = verdict("slope(mean_ms[page=static], over=users) @ each setup", ">", 0, rows)
    assert slope.status is Status.NOT_EVALUABLE and slope.reason.startswith("at setup=varnish:")


def test_argmax_needs_every_level_of_its_variable():
    rows = [o for o in lb_study() if not (o.vars["setup"] == "apache" and o.vars["users"] == 4000)]
    result = verdict("argmax(mean_ms[page=php,users=max,spawn_rate=max], over=setup)", "==", "haproxy", rows)
    assert result.status is Status.NOT_EVALUABLE and "setup=apache" in result.reason


def interval(run_id, t, pass_no=1, **figures):
    return Observation(
        vars={"server": "erlang", "t": t}, figures=figures, pass_no=pass_no, run_id=run_id, grain=Grain.INTERVAL
    )


def run_of(run_id, first_error, pass_no=1):
    return Observation(
        vars={"server": "erlang"},
        figures={"first_error_s": first_error},
        pass_no=pass_no,
        run_id=run_id,
        grain=Grain.RUN,
    )


def test_a_selector_on_a_figure_of_the_run_compares_each_interval_with_its_own_run():
    rows = [interval("r1", t, concurrent_users=100.0 * t) for t in (0, 10, 20, 30)]
    rows += [interval("r2", t, pass_no=2, concurrent_users=100.0 * t) for t in (0, 10, 20, 30)]
    rows += [run_of("r1", 20.0), run_of("r2", 30.0, pass_no=2)]
    # r1 counts up to t=10, r2 up to t=20: the mean over the passes at t=20 is r2's alone
    assert evaluate_metric("max(concurrent_users[server=erlang,t<first_error_s])", rows) == 2000.0
    assert evaluate_metric("max(concurrent_users[server=erlang,t>10])", rows) == 3000.0
    assert evaluate_metric("first_error_s[server=erlang]", rows).scalar() == 25.0
    result = verdict("max(concurrent_users[server=erlang,t<first_error_s])", ">=", 1500, rows)
    assert result.status is Status.FAILS and result.passes_holding() == (1, 2)  # r1 peaked at 1000
    result = verdict("max(concurrent_users[server=erlang,t<first_error_s])", ">=", 500, rows)
    assert result.status is Status.NOT_ENOUGH_PASSES and result.passes_holding() == (2, 2)
    assert "not enough passes (2 of 3)" in result.reason


def test_a_run_without_errors_is_whole_before_its_first_error_and_errs_at_no_time():
    rows = [interval("r1", t, concurrent_users=50.0 + t) for t in (0, 12, 24)] + [run_of("r1", math.inf)]
    assert evaluate_metric("max(concurrent_users[server=erlang,t<first_error_s])", rows) == 74.0
    assert verdict("first_error_s[server=erlang]", "between", (120, 240), rows).status is Status.FAILS
    assert verdict("first_error_s[server=erlang]", ">", 240, rows).status is Status.HOLDS


def test_step_figures_are_read_from_steps_even_beside_intervals():
    rows = [obs(server="erlang", rate=500, ok_rps=480.0), obs(server="erlang", rate=1000, ok_rps=950.0)]
    rows += [interval("r1", t, ok_rps=10.0) for t in (0, 12)] + [run_of("r1", math.inf)]
    assert evaluate_metric("max(ok_rps[server=erlang])", rows) == 950.0
    assert evaluate_metric("max(ok_rps[server=erlang,t=0..12])", rows) == 10.0
    assert verdict("ratio(ok_rps[server=erlang,rate=1000], ok_rps[server=erlang,rate=500])", ">", 1.9, rows).status is (
        Status.HOLDS
    )


def test_time_selectors_that_make_no_sense_are_not_evaluable():
    rows = [interval("r1", t, ok_rps=10.0) for t in (0, 12)] + [run_of("r1", 12.0)]
    for metric, why in (
        ("first_error_s[server=erlang,t=0..12]", "figure of a whole run"),
        ("max(ok_rps[server=erlang,t<p99_ms])", "neither a number nor a figure of a run"),
        ("max(ok_rps[server=erlang,t<0..12])", "a range takes '='"),
        ("max(ok_rps[server=erlang,t>100])", "no interval with server=erlang, t>100"),
    ):
        result = verdict(metric, "<", 1, rows)
        assert result.status is Status.NOT_EVALUABLE and why in result.reason, (metric, result.reason)


def test_intervals_without_requests_have_no_latency_but_a_run_without_any_has_none_at_all():
    rows = [interval("r1", 0, ok_rps=0.0), interval("r1", 12, ok_rps=5.0, p99_ms=4.0), run_of("r1", math.inf)]
    assert evaluate_metric("mean(p99_ms[server=erlang,t=0..12])", rows) == 4.0
    rows += [interval("r2", 0, pass_no=2, ok_rps=0.0), run_of("r2", math.inf, pass_no=2)]
    result = verdict("mean(p99_ms[server=erlang,t=0..12])", "<", 10, rows)
    assert result.status is Status.NOT_EVALUABLE and "1 of 2 runs lack it" in result.reason
