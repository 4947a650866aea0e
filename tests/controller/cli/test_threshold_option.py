"""`--threshold` on `loadfleet run` and `loadfleet validate`: the shorthand joins the plan's own
thresholds before the plan is checked, a bad one is bad input (exit 2) named `--threshold[N]`.
Nothing here starts a run: `run`'s sending is replaced by a recorder of the plan it would send."""

import pytest

from loadfleet.controller.cli import build_parser, main
from loadfleet.controller.cli.commands import run as run_command
from loadfleet.controller.model.errors import EXIT_BAD_INPUT, EXIT_OK
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.plan.thresholds import Metric, Over, OverKind

PLAN = """
duration_s: 5
targets: [{url: "http://127.0.0.2:8080", name: app}]
workload: {requests: [{name: account, path: /account}, {name: home, path: /}]}
load: {model: closed, clients: 2}
thresholds:
  - {metric: error_pct, below: 1}
"""


@pytest.fixture
def plan_file(tmp_path):
    path = tmp_path / "shop.yaml"
    path.write_text(PLAN)
    return path


@pytest.fixture
def sent(monkeypatch):
    """The plans `run` would send a controller, in place of sending them."""
    plans: list[str] = []

    async def record(address, plan_yaml, as_json, credentials=None, outputs=None):
        plans.append(plan_yaml)
        return EXIT_OK

    monkeypatch.setattr(run_command, "_run_on", record)
    return plans


def test_run_sends_the_cli_thresholds_after_the_plans_own(plan_file, sent):
    code = main(
        [
            "run",
            str(plan_file),
            "--controller",
            "127.0.0.1:1",
            "--threshold",
            "p99_ms<250",
            "--threshold",
            "request=account:ok_rps>10@step",
        ]
    )
    assert code == EXIT_OK
    [plan_yaml] = sent
    thresholds = parse_plan(plan_yaml).thresholds  # as the controller reads them
    assert [t.name for t in thresholds] == ["error_pct < 1 %", "p99 latency < 250 ms", "ok_rps > 10 /s"]
    assert thresholds[2].metric is Metric.OK_RPS and thresholds[2].request == "account"
    assert thresholds[2].over == Over(OverKind.STEP)


def test_run_without_the_option_sends_the_plans_thresholds(plan_file, sent):
    assert main(["run", str(plan_file), "--controller", "127.0.0.1:1"]) == EXIT_OK
    assert [t.name for t in parse_plan(sent[0]).thresholds] == ["error_pct < 1 %"]


@pytest.mark.parametrize("command", ["run", "validate"])
@pytest.mark.parametrize(
    "specs, expected",
    [
        (["p99_ms<250", "p99<250"], "--threshold[1]: 'p99<250': 'p99' is no figure"),
        (
            ["request=nope:error_pct<1"],
            "--threshold[0].request: no request is named 'nope' (the plan's: account, home)",
        ),
        (["error_pct<1"], "--threshold[0]: 'error_pct < 1 %' names thresholds[0] too"),
        (["target=app:connect.p99_ms<5"], "--threshold[0].stat: 'p99' is no stat of connect: mean or max"),
        (["ok>1@window=0.5s"], "--threshold[0].over.window_s: 0.5 s is shorter than the plan's interval of 1 s"),
    ],
)
def test_a_bad_threshold_is_bad_input_before_anything_starts(command, specs, expected, plan_file, sent, capsys):
    args = [command, str(plan_file)] + [a for spec in specs for a in ("--threshold", spec)]
    if command == "run":
        args += ["--controller", "127.0.0.1:1"]
    assert main(args) == EXIT_BAD_INPUT
    assert expected in capsys.readouterr().err
    assert sent == []


def test_validate_counts_the_thresholds(plan_file, capsys):
    code = main(["validate", str(plan_file), "--threshold", "p99.9_ms<500", "--threshold", "check_pass_pct[x]>1"])
    assert code == EXIT_BAD_INPUT  # no request declares a check yet
    assert (
        "--threshold[1].check: no check is named 'x' (the plan's requests declare no checks)" in capsys.readouterr().err
    )
    assert main(["validate", str(plan_file), "--threshold", "p99.9_ms<500", "--threshold", "waiting.p90_ms<5"]) == 0
    assert "2 requests, 2 clients, 5 s, 3 thresholds)" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["run", "validate"])
def test_the_grammar_is_in_the_help(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    out = capsys.readouterr().out
    assert "[target=NAME:|request=NAME:]FIGURE(<|>)LIMIT[@run|@step|@window=30s]" in out
    assert "check_pass_pct[CHECK NAME]" in out and "--threshold SPEC" in out
