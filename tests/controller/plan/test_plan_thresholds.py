"""A plan's thresholds and verdict rules: read from YAML and from the CLI's shorthand into the same
values, every mistake named by its path, and kept through the resolved plan the CLI sends."""

import pytest

from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.plan.shorthand import ShorthandError, shorthand_doc
from loadfleet.controller.plan.thresholds import (
    MAX_THRESHOLDS,
    MAX_WINDOW_INTERVALS,
    Abort,
    Metric,
    NoData,
    Over,
    OverKind,
    Stat,
    StatKind,
    Threshold,
    VerdictRules,
    parse_stat,
)

PLAN = """
duration_s: 60
targets: [{url: "http://127.0.0.2:8080", name: app}, {url: "http://127.0.0.3:8080"}]
workload:
  requests: [{name: account, path: /account}, {name: home, path: /}]
load: {model: closed, clients: 2}
"""

SWEPT = """
targets: [{url: "http://127.0.0.2:8080", name: app}]
workload: {requests: [{name: account, path: /account}]}
load: {model: closed}
sweep: {steps: [1, 2], step_s: 10}
"""


def with_thresholds(*entries: str, plan: str = PLAN) -> str:
    return plan + "thresholds:\n" + "".join(f"  - {e}\n" for e in entries)


def only(text: str, *, cli: tuple[str, ...] = ()) -> Threshold:
    [threshold] = parse_plan(text, thresholds=cli).thresholds
    return threshold


P99 = Stat(StatKind.PERCENTILE, 99.0)


@pytest.mark.parametrize(
    "entry, spec, expected",
    [
        (
            "{metric: latency, stat: p99, below_ms: 250}",
            "p99_ms<250",
            Threshold("p99 latency < 250 ms", Metric.LATENCY, 250.0, True, P99),
        ),
        (
            "{metric: latency, stat: p99.9, request: account, over: {window_s: 30}, below_ms: 500}",
            "request=account:p99.9_ms<500@window=30s",
            Threshold(
                "p99.9 latency < 500 ms",
                Metric.LATENCY,
                500.0,
                True,
                Stat(StatKind.PERCENTILE, 99.9),
                request="account",
                over=Over(OverKind.WINDOW, 30.0),
            ),
        ),
        (
            "{metric: waiting, stat: mean, target: app, below_ms: 20}",
            "target=app:waiting.mean_ms<20",
            Threshold("mean waiting < 20 ms", Metric.WAITING, 20.0, True, Stat(StatKind.MEAN), target="app"),
        ),
        (
            "{metric: connect, stat: max, above_ms: 0.5, over: step}",
            "connect.max_ms>0.5@step",
            Threshold("max connect > 0.5 ms", Metric.CONNECT, 0.5, False, Stat(StatKind.MAX), over=Over(OverKind.STEP)),
        ),
        (
            "{metric: queueing, stat: mean, target: app, below_ms: 2, over: step}",
            "target=app:queueing.mean_ms<2@step",
            Threshold(
                "mean queueing < 2 ms",
                Metric.QUEUEING,
                2.0,
                True,
                Stat(StatKind.MEAN),
                target="app",
                over=Over(OverKind.STEP),
            ),
        ),
        (
            "{metric: latency, stat: stddev, below_ms: 9}",
            "latency.stddev_ms < 9",
            Threshold("stddev latency < 9 ms", Metric.LATENCY, 9.0, True, Stat(StatKind.STDDEV)),
        ),
        ("{metric: error_pct, below: 1}", "error_pct<1", Threshold("error_pct < 1 %", Metric.ERROR_PCT, 1.0, True)),
        ("{metric: ok_rps, above: 900}", "ok_rps>900", Threshold("ok_rps > 900 /s", Metric.OK_RPS, 900.0, False)),
        (
            "{metric: rps, above: 1000, over: run}",
            "rps>1000@run",
            Threshold("rps > 1000 /s", Metric.RPS, 1000.0, False),
        ),
        ("{metric: requests, above: 10}", "requests>10", Threshold("requests > 10", Metric.REQUESTS, 10.0, False)),
        ("{metric: ok, above: 0}", "ok>0", Threshold("ok > 0", Metric.OK, 0.0, False)),
    ],
)
def test_yaml_and_shorthand_give_the_same_threshold(entry, spec, expected):
    assert only(with_thresholds(entry)) == expected
    assert only(PLAN, cli=(spec,)) == expected


def test_every_part_of_an_entry_is_read():
    entry = (
        "{name: enough load, metric: rps, above: 1000, target: app, over: step, abort: {grace_s: 30}, on_no_data: pass}"
    )
    assert only(with_thresholds(entry)) == Threshold(
        "enough load",
        Metric.RPS,
        1000.0,
        False,
        target="app",
        over=Over(OverKind.STEP),
        abort=Abort(30.0),
        on_no_data=NoData.PASS,
    )
    assert only(with_thresholds("{metric: error_pct, below: 5, abort: true}")).abort == Abort(0.0)
    assert only(with_thresholds("{metric: error_pct, below: 5, abort: false}")).abort is None


def test_defaults_no_thresholds_and_a_verdict_that_requires_success():
    plan = parse_plan(PLAN)
    assert plan.thresholds == () and plan.verdict == VerdictRules()
    assert plan.verdict.require_success and plan.verdict.inconclusive_fails
    assert "thresholds" not in plan.to_yaml() and "verdict" not in plan.to_yaml()
    rules = parse_plan(PLAN + "verdict: {require_success: false, inconclusive: pass}\n").verdict
    assert rules == VerdictRules(require_success=False, inconclusive_fails=False)


@pytest.mark.parametrize(
    "text",
    [
        with_thresholds(
            "{metric: latency, stat: p99.9999, below_ms: 250}",
            "{name: enough load, metric: rps, above: 1000, target: app, abort: {grace_s: 30}, on_no_data: pass}",
            "{metric: connect, stat: mean, request: account, over: {window_s: 2.5}, below_ms: 3}",
            "{metric: error_pct, below: 0.01, abort: true}",
        )
        + "verdict: {require_success: false, inconclusive: pass}\n",
        with_thresholds(
            "{metric: ok_rps, above: 1, over: step}", "{metric: latency, stat: max, over: run, below_ms: 9}", plan=SWEPT
        ),
    ],
)
def test_thresholds_and_verdict_round_trip_through_the_resolved_plan(text):
    plan = parse_plan(text, thresholds=("request=account:p50_ms<100@step",))
    assert len(plan.thresholds) >= 3
    again = parse_plan(plan.to_yaml())  # what the controller receives from `loadfleet run`
    assert again == plan and again.thresholds == plan.thresholds and again.verdict == plan.verdict


@pytest.mark.parametrize(
    "entry, path, fragment",
    [
        ("{metric: latncy, below_ms: 1}", "thresholds[0].metric", "'latncy' is not one of ['latency', 'waiting'"),
        (
            "{metric: latency, below_ms: 250}",
            "thresholds[0].stat",
            "latency needs a stat: min, mean, stddev, max or pN",
        ),
        ("{metric: connect, below_ms: 5}", "thresholds[0].stat", "connect needs a stat: mean or max"),
        ("{metric: error_pct, stat: p99, below: 1}", "thresholds[0].stat", "error_pct takes no stat"),
        ("{metric: latency, stat: p101, below_ms: 1}", "thresholds[0].stat", "'p101' is no stat of latency"),
        ("{metric: latency, stat: p0, below_ms: 1}", "thresholds[0].stat", "'p0' is no stat of latency"),
        ("{metric: latency, stat: p99.12345, below_ms: 1}", "thresholds[0].stat", "is no stat of latency"),
        ("{metric: waiting, stat: min, below_ms: 1}", "thresholds[0].stat", "no stat of waiting: mean, max or pN"),
        ("{metric: tls, stat: p99, below_ms: 1}", "thresholds[0].stat", "sums and maxima, no histogram"),
        ("{metric: latency, stat: p99, below: 250}", "thresholds[0].below", "latency is in ms: use below_ms"),
        ("{metric: waiting, stat: p99, above: 1}", "thresholds[0].above", "use above_ms"),
        ("{metric: error_pct, below_ms: 1}", "thresholds[0].below_ms", "error_pct is no time: use below"),
        ("{metric: rps, below: 9, above: 1}", "thresholds[0]", "give one limit, below or above, not below and above"),
        ("{metric: latency, stat: max}", "thresholds[0]", "give a limit: below_ms or above_ms"),
        ("{metric: error_pct, below: 0}", "thresholds[0].below", "could never pass"),
        ("{metric: error_pct, below: 150}", "thresholds[0].below", "a percentage is at most 100"),
        ("{metric: error_pct, above: -1}", "thresholds[0].above", "less than the minimum of 0"),
        ("{metric: rps, above: 1, target: web}", "thresholds[0].target", "no target is named 'web' (the plan's: app)"),
        (
            "{metric: rps, above: 1, request: acount}",
            "thresholds[0].request",
            "no request is named 'acount' (the plan's: account, home)",
        ),
        ("{metric: rps, above: 1, target: app, request: home}", "thresholds[0]", "give target or request, not both"),
        ("{metric: check_pass_pct, above: 99}", "thresholds[0].check", "check_pass_pct needs `check`"),
        (
            "{metric: check_pass_pct, above: 99, check: logged in}",
            "thresholds[0].check",
            "no check is named 'logged in' (the plan's requests declare no checks)",
        ),
        ("{metric: ok, above: 1, check: logged in}", "thresholds[0].check", "only check_pass_pct takes a check"),
        (
            "{metric: ok, above: 1, over: {window_s: 0.5}}",
            "thresholds[0].over.window_s",
            "shorter than the plan's interval of 1 s",
        ),
        (
            "{metric: ok, above: 1, over: {window_s: 601}}",
            "thresholds[0].over.window_s",
            f"above {MAX_WINDOW_INTERVALS} intervals (600 s at 1 s)",
        ),
        ("{metric: ok, above: 1, over: week}", "thresholds[0].over", "'week' is not one of ['run', 'step']"),
        (
            "{metric: ok, above: 1, abort: {grace_s: -1}}",
            "thresholds[0].abort.grace_s",
            "a grace of -1 s: give 0 s or more",
        ),
        ("{metric: ok, above: 1, on_no_data: maybe}", "thresholds[0].on_no_data", "'maybe' is not one of"),
        ("{metric: ok, above: 1, scenario: a}", "thresholds[0].scenario", "the plan has no scenarios"),
    ],
)
def test_each_mistake_is_named_by_its_path(entry, path, fragment):
    with pytest.raises(PlanError) as info:
        parse_plan(with_thresholds(entry))
    assert [p.path for p in info.value.problems] == [path], info.value.problems
    assert fragment in info.value.problems[0].message


def test_all_mistakes_at_once_and_a_name_used_twice():
    text = with_thresholds(
        "{metric: latency, below: 250}",
        "{metric: rps, above: 1, name: load}",
        "{metric: ok, above: 1, name: load}",
        "{metric: error_pct, below: 1}",
        "{metric: error_pct, below: 1}",  # unnamed: its name is its limit in words, also twice
    )
    with pytest.raises(PlanError) as info:
        parse_plan(text)
    assert [(p.path, p.message) for p in info.value.problems] == [
        ("thresholds[0].stat", "latency needs a stat: min, mean, stddev, max or pN (0 < N ≤ 100, e.g. p99, p99.9)"),
        ("thresholds[0].below", "latency is in ms: use below_ms"),
        ("thresholds[2].name", "'load' names thresholds[1] too: give one a `name`"),
        ("thresholds[4]", "'error_pct < 1 %' names thresholds[3] too: give one a `name`"),
    ]


def test_a_window_is_bounded_by_the_plans_interval():
    at_10_s = PLAN.replace("duration_s: 60", "duration_s: 60\ninterval_ms: 10000")
    assert only(with_thresholds("{metric: ok, above: 1, over: {window_s: 6000}}", plan=at_10_s)).over.window_s == 6000
    with pytest.raises(PlanError) as info:
        parse_plan(with_thresholds("{metric: ok, above: 1, over: {window_s: 5}}", plan=at_10_s))
    assert "shorter than the plan's interval of 10 s" in str(info.value)
    with pytest.raises(PlanError) as info:  # 600 intervals of 10 s: the schema's own bound
        parse_plan(with_thresholds("{metric: ok, above: 1, over: {window_s: 6001}}", plan=at_10_s))
    assert [p.path for p in info.value.problems] == ["thresholds[0].over.window_s"]


def test_at_most_so_many_thresholds():
    entries = [f"{{metric: ok, above: {i}}}" for i in range(MAX_THRESHOLDS + 1)]
    with pytest.raises(PlanError) as info:
        parse_plan(with_thresholds(*entries))
    assert [p.path for p in info.value.problems] == ["thresholds"]
    assert len(parse_plan(with_thresholds(*entries[:MAX_THRESHOLDS])).thresholds) == MAX_THRESHOLDS


def test_a_sweep_says_over_for_each_threshold():
    with pytest.raises(PlanError) as info:
        parse_plan(with_thresholds("{metric: ok_rps, above: 1}", "{metric: ok, above: 1, over: step}", plan=SWEPT))
    [problem] = info.value.problems
    assert problem.path == "thresholds[0].over" and "a plan with a sweep says `over`" in problem.message
    with pytest.raises(PlanError) as info:
        parse_plan(SWEPT, thresholds=("ok_rps>1",))
    assert [p.path for p in info.value.problems] == ["--threshold[0].over"]
    assert "@step" in info.value.problems[0].message
    assert only(SWEPT, cli=("ok_rps>1@step",)).over == Over(OverKind.STEP)


def test_a_gatling_projects_requests_are_not_known_before_the_run():
    gatling = """
duration_s: 5
targets: [{url: "http://127.0.0.2:8080"}]
load: {model: users, users: 2, spawn_rate: 1}
driver: gatling
gatling: {project: /opt/sim, simulation: demo.Sim}
"""
    assert only(with_thresholds("{metric: error_pct, below: 1, request: checkout}", plan=gatling)).request == "checkout"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("p99", Stat(StatKind.PERCENTILE, 99.0)),
        ("p99.9", Stat(StatKind.PERCENTILE, 99.9)),
        ("p100", Stat(StatKind.PERCENTILE, 100.0)),
        ("p0.0001", Stat(StatKind.PERCENTILE, 0.0001)),
        ("mean", Stat(StatKind.MEAN)),
        ("stddev", Stat(StatKind.STDDEV)),
        ("p0", None),
        ("p100.5", None),
        ("p99.12345", None),  # more than 4 decimals would not be written back exactly
        ("percentile", None),
        ("P99", None),
    ],
)
def test_stats(text, expected):
    assert parse_stat(text) == expected
    if expected and expected.kind is StatKind.PERCENTILE:
        assert parse_stat(expected.label) == expected  # written back exactly


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("p99ms<250", "'p99ms' is no figure"),
        ("latency<250", "'latency' is no figure"),
        ("p99_ms=250", "after the figure comes < or >"),
        ("p99_ms", "after the figure comes < or >"),
        ("p99_ms<250ms", "the limit '250ms' is not a number (the unit is in the figure's name"),
        ("p99_ms<nan", "not a finite number"),
        ("p99_ms<", "the limit '' is not a number"),
        ("request=:p99_ms<1", "a scope is request=NAME: before the figure"),
        ("target=app", "a scope is target=NAME: before the figure"),
        ("error_pct<1@minute", "after @ comes run, step or window=SECONDS"),
        ("error_pct<1@window=", "after @ comes run, step or window=SECONDS"),
        ("check_pass_pct[logged in>99", "check_pass_pct[CHECK NAME]"),
        ("check_pass_pct[]>99", "check_pass_pct[CHECK NAME]"),
        ("", "is no figure"),
    ],
)
def test_a_bad_shorthand_says_what_is_wrong(spec, fragment):
    with pytest.raises(ShorthandError) as info:
        shorthand_doc(spec)
    assert fragment in str(info.value)


def test_shorthand_entries_are_plan_entries():
    assert shorthand_doc("check_pass_pct[logged in]>99.9@window=30") == {
        "metric": "check_pass_pct",
        "check": "logged in",
        "above": 99.9,
        "over": {"window_s": 30.0},
    }
    assert shorthand_doc("target=app:receiving.max_ms<3") == {
        "target": "app",
        "metric": "receiving",
        "stat": "max",
        "below_ms": 3.0,
    }


def test_cli_thresholds_are_named_by_their_place_and_follow_the_plans_own():
    text = with_thresholds("{metric: ok, above: 1}")
    with pytest.raises(PlanError) as info:
        parse_plan(text, thresholds=("p99_ms<250", "bogus<1", "request=nope:rps>1", "ok>1", "connect.p99_ms<1"))
    problems = [(p.path, p.message) for p in info.value.problems]
    assert problems == [("--threshold[1]", "'bogus<1': " + problems[0][1].split(": ", 1)[1])]
    assert "'bogus' is no figure" in problems[0][1]
    with pytest.raises(PlanError) as info:
        parse_plan(text, thresholds=("p99_ms<250", "request=nope:rps>1", "ok>1", "connect.p99_ms<1"))
    assert [(p.path, p.message) for p in info.value.problems] == [
        ("--threshold[1].request", "no request is named 'nope' (the plan's: account, home)"),
        ("--threshold[2]", "'ok > 1' names thresholds[0] too: give one a `name`"),
        (
            "--threshold[3].stat",
            "'p99' is no stat of connect: mean or max (its phase keeps sums and maxima, no histogram)",
        ),
    ]
    plan = parse_plan(text, thresholds=("p99_ms<250",))
    assert [t.name for t in plan.thresholds] == ["ok > 1", "p99 latency < 250 ms"]
