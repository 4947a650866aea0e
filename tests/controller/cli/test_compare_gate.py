"""`loadfleet compare BASE CANDIDATE --gate ...` as a pipeline runs it: the exit codes 0, 4, 5
and 2, the table, --json, --junit and --markdown, on synthetic run directories written by the
controller's own writers (tests/controller/analysis/gateruns.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import xmlschema
from controller.analysis.gateruns import PLAN, RunShape, write_run

from loadfleet.controller.cli import main
from loadfleet.controller.model.errors import EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_OK, EXIT_THRESHOLD_FAILED

SCHEMA = xmlschema.XMLSchema(Path(__file__).parents[2] / "support" / "junit" / "junit-10.xsd")
GATES = ["--gate", "p99_ms:+10%", "--gate", "error_pct:+0.5", "--gate", "ok_rps:-5%"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Runs of a ~5 ms service: a base, the same again, 2 ms slower, too short, another plan."""
    root = tmp_path_factory.mktemp("gate-runs")
    other_plan = {**PLAN, "load": {"model": "closed", "clients": 16}}
    return {
        "base": write_run(root / "base-run", RunShape(seed=1)),
        "same": write_run(root / "same-run", RunShape(seed=1)),
        "slow": write_run(root / "slow-run", RunShape(seed=2, extra_us=2000)),
        "short": write_run(root / "short-run", RunShape(seed=3, intervals=15)),
        "replanned": write_run(root / "replanned-run", RunShape(seed=1, plan=other_plan)),
    }


def compare(runs, base, candidate, *args) -> int:
    return main(["compare", str(runs[base]), str(runs[candidate]), *map(str, args)])


@pytest.mark.parametrize(
    ("candidate", "options", "code", "verdict"),
    [
        ("same", [], EXIT_OK, "gate passed (exit 0)"),
        ("slow", [], EXIT_THRESHOLD_FAILED, "REGRESSION (exit 4): p99_ms +10% got worse"),
        ("short", [], EXIT_INCONCLUSIVE, "INCONCLUSIVE (exit 5)"),
        ("short", ["--inconclusive-ok"], EXIT_OK, "exit 0 (--inconclusive-ok)"),
        ("slow", ["--inconclusive-ok"], EXIT_THRESHOLD_FAILED, "REGRESSION"),  # only 5 becomes 0
        ("replanned", [], EXIT_INCONCLUSIVE, "INCONCLUSIVE"),
        ("replanned", ["--allow-plan-change"], EXIT_OK, "gate passed"),
    ],
)
def test_the_exit_code_and_the_verdict_line(runs, capsys, candidate, options, code, verdict):
    assert compare(runs, "base", candidate, *GATES, *options) == code
    out = capsys.readouterr().out
    assert verdict in out.splitlines()[-1]
    assert "figure" in out and "95 % CI" in out and "p99_ms" in out and "ok_rps" in out


def test_the_table_names_why_runs_are_not_comparable(runs, capsys):
    compare(runs, "base", "replanned", *GATES)
    out = capsys.readouterr().out
    assert "not comparable: the plans differ in load.clients" in out


def test_json_is_the_gate_report(runs, capsys):
    assert compare(runs, "base", "slow", "--gate", "p99_ms:+10%", "--json") == EXIT_THRESHOLD_FAILED
    doc = json.loads(capsys.readouterr().out)
    (p99,) = doc["figures"]
    assert doc["exit_code"] == EXIT_THRESHOLD_FAILED and doc["base_run"] == "base-run"
    assert p99["outcome"] == "regression" and p99["low"] > 10 and p99["relative"] is True


def test_a_request_is_gated_on_its_own_rows(runs, capsys):
    code = compare(runs, "base", "slow", "--gate", "mean_ms:+10%", "--gate-request", "login", "--json")
    assert code == EXIT_THRESHOLD_FAILED
    (mean,) = json.loads(capsys.readouterr().out)["figures"]
    assert mean["base"] == pytest.approx(5.5, abs=0.2) and mean["candidate"] == pytest.approx(7.5, abs=0.2)


def test_junit_and_markdown_files_of_the_gate(runs, tmp_path, capsys):
    junit, markdown = tmp_path / "gate.xml", tmp_path / "gate.md"
    code = compare(runs, "base", "slow", *GATES, "--junit", junit, "--markdown", markdown)
    assert code == EXIT_THRESHOLD_FAILED
    SCHEMA.validate(str(junit))
    assert junit.read_text().count("<failure") == 1 and "p99_ms +10%" in junit.read_text()
    assert "regression" in markdown.read_text() and "| p99_ms |" in markdown.read_text()


def test_without_gate_compare_prints_the_side_by_side_table(runs, tmp_path, capsys):
    out_file = tmp_path / "c.html"
    assert compare(runs, "base", "slow", "--out", out_file) == EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == f"wrote {out_file}" and "(changes are against the first run)" in out
    assert out_file.is_file()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--gate", "p99_ms:-10%"], "--gate p99_ms:-10%: a tolerance is the change allowed in the bad direction"),
        (["--gate", "p99_ms:+10%", "--gate-request", "login"], "--gate-request login: p99_ms cannot be gated"),
        (["--gate", "ok_rps:-5%", "--gate-request", "logout"], "no request named 'logout'"),
        (["--inconclusive-ok"], "--inconclusive-ok only with --gate"),
    ],
)
def test_bad_input_exits_2_with_a_message(runs, capsys, args, says):
    assert compare(runs, "base", "slow", *args) == EXIT_BAD_INPUT
    assert says in capsys.readouterr().err


def test_the_gate_needs_a_baseline_and_a_candidate(runs, capsys):
    assert main(["compare", str(runs["base"]), *GATES]) == EXIT_BAD_INPUT
    assert "needs a baseline run and a candidate run" in capsys.readouterr().err


def test_every_output_says_how_many_baselines_the_gate_used(runs, tmp_path, capsys):
    junit, markdown = tmp_path / "gate.xml", tmp_path / "gate.md"
    argv = ["compare", *(str(runs[r]) for r in ("base", "same", "slow")), *GATES]
    assert main([*argv, "--junit", str(junit), "--markdown", str(markdown)]) == EXIT_THRESHOLD_FAILED
    out = capsys.readouterr().out
    assert "base base-run, same-run, candidate slow-run" in out and "method: 2 baseline runs" in out
    assert "2 baseline runs" in junit.read_text() and "2 baseline runs" in markdown.read_text()
    assert main([*argv, "--json"]) == EXIT_THRESHOLD_FAILED
    doc = json.loads(capsys.readouterr().out)
    assert doc["baselines"] == 2 and doc["base_runs"] == ["base-run", "same-run"]


def test_a_single_baseline_says_between_run_variance_is_not_included(runs, capsys):
    assert compare(runs, "base", "same", *GATES, "--json") == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["baselines"] == 1 and "between-run variance not included" in doc["method"]


def test_a_missing_run_directory_exits_2(runs, tmp_path, capsys):
    assert main(["compare", str(runs["base"]), str(tmp_path / "nothing"), *GATES]) == EXIT_BAD_INPUT
    assert "no such run directory" in capsys.readouterr().err


def test_a_junit_file_that_cannot_be_written_exits_2_before_the_runs_are_read(runs, tmp_path, capsys):
    where = tmp_path / "gone" / "gate.xml"
    assert compare(runs, "base", "slow", *GATES, "--junit", where) == EXIT_BAD_INPUT
    assert f"--junit {where}: the directory {where.parent} does not exist" in capsys.readouterr().err
