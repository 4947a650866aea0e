"""Markdown of a gate (and of a run): the verdict line the exit code calls for, one table row per
figure, cells that cannot break the table."""

from __future__ import annotations

import pytest

from loadfleet.controller.model.gateresult import GateFigure, GateOutcome, GateReport
from loadfleet.controller.model.summarydoc import Entry, EntryFigures, Step, Stop, SummaryDoc
from loadfleet.controller.model.thresholdresult import Outcome, RunVerdict, ThresholdResult
from loadfleet.controller.output.markdown import gate_markdown, run_markdown


def figure(outcome: GateOutcome, name: str = "p99_ms", reason: str = "") -> GateFigure:
    return GateFigure(name, "+10%", 200.0, 224.6, 12.3, 8.1, 16.0, True, outcome, reason)


def report(*figures: GateFigure, reasons: tuple[str, ...] = ()) -> GateReport:
    return GateReport(("base-run",), "cand-run", figures, "moving-block bootstrap", reasons)


@pytest.mark.parametrize(
    ("outcomes", "verdict"),
    [
        ((GateOutcome.PASS, GateOutcome.IMPROVEMENT), "✅ **gate passed** (exit 0)"),
        ((GateOutcome.PASS, GateOutcome.REGRESSION), "❌ **regression** (exit 4)"),
        ((GateOutcome.INCONCLUSIVE, GateOutcome.REGRESSION), "❌ **regression** (exit 4)"),
        ((GateOutcome.PASS, GateOutcome.INCONCLUSIVE), "⚠️ **inconclusive** (exit 5)"),
    ],
)
def test_the_first_line_is_the_verdict_the_exit_code_calls_for(outcomes, verdict):
    text = gate_markdown(report(*(figure(o, name=f"f{i}") for i, o in enumerate(outcomes))))
    assert text.splitlines()[0].startswith(verdict)


def test_a_row_per_figure_with_its_change_and_interval():
    text = gate_markdown(report(figure(GateOutcome.REGRESSION), figure(GateOutcome.PASS, name="ok_rps")))
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| figure | tolerance | base | candidate | change | 95 % CI | verdict")
    assert rows[1] == "| p99_ms | +10% | 200.0 | 224.6 | +12.3 % | [+8.1 %, +16.0 %] | ❌ regression |  |"
    assert rows[2].startswith("| ok_rps |") and "✅ pass" in rows[2]
    assert len(rows) == 3


def test_runs_not_comparable_are_listed_and_no_table_is_drawn_without_figures():
    text = gate_markdown(report(reasons=("plans differ: rate",)))
    assert text.splitlines()[0].startswith("⚠️ **inconclusive** (exit 5)")
    assert "- not comparable: plans differ: rate" in text
    assert "| figure |" not in text


def test_a_reason_with_a_pipe_or_a_line_break_stays_in_its_cell():
    text = gate_markdown(report(figure(GateOutcome.INCONCLUSIVE, reason="a | b\nc")))
    row = next(line for line in text.splitlines() if line.startswith("| p99_ms"))
    assert row.endswith("| a \\| b c |")
    assert row.replace("\\|", "").count("|") == 9


# ------------------------------------------------------------------ a run


def result(outcome: Outcome, name: str = "p99", reason: str = "", steps: tuple[str, ...] = ()) -> ThresholdResult:
    value = 312.4 if outcome is Outcome.FAILED else None if outcome is Outcome.INCONCLUSIVE else 120.0
    return ThresholdResult(
        name, "p99 latency < 250 ms", "cluster", "run", 250.0, "ms", value, outcome, steps, reason=reason
    )


def run_doc(*results: ThresholdResult, **fields) -> SummaryDoc:
    total = Entry("total", EntryFigures(requests=12000, rps=400.0, ok_rps=398.5, error_pct=0.375))
    return SummaryDoc(run_id="r1", plan_name="quick", duration_s=30.0, total=total, thresholds=results, **fields)


@pytest.mark.parametrize(
    ("code", "fields", "verdict"),
    [
        (0, {}, "✅ **passed** (exit 0): every threshold passed"),
        (3, {"stop": Stop("error rate 12 % > 5 %")}, "✅ **passed, stopped early** (exit 3)"),
        (
            4,
            {"verdict": RunVerdict(False, ("p99", "some response was ok"))},
            "❌ **threshold failed** (exit 4): p99; some",
        ),
        (1, {"incomplete_files": ("intervals.csv",)}, "❌ **run failed** (exit 1): the run failed or its files are"),
        (2, {}, "❌ **error** (exit 2)"),
    ],
)
def test_the_first_line_of_a_run_is_the_verdict_its_exit_code_means(code, fields, verdict):
    lines = run_markdown(run_doc(**fields), exit_code=code, run_dir="runs/r1").splitlines()
    assert lines[0].startswith(verdict)
    if code == 3:
        assert lines[0].endswith(": error rate 12 % > 5 %")
    if code == 1:
        assert lines[0].endswith("incomplete intervals.csv")


def test_the_run_line_shows_attempts_and_successes_apart():
    text = run_markdown(run_doc(), exit_code=0, run_dir="runs/r1")
    assert "Run `r1` of plan `quick`: 12,000 requests in 30 s, 400.0/s sent, 398.5/s ok, 0.375 % errors." in text


def test_a_row_per_threshold_with_its_value_result_and_why():
    text = run_markdown(
        run_doc(
            result(Outcome.FAILED, steps=("s2",)),
            result(Outcome.INCONCLUSIVE, name="p99 api", reason="no response to measure"),
            result(Outcome.PASSED),
        ),
        exit_code=4,
        run_dir="runs/r1",
    )
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0] == "| threshold | over | scope | value | result | why |"
    assert rows[1] == "| p99: p99 latency < 250 ms | run | cluster | 312.4 ms | ❌ failed | failing steps: s2 |"
    assert (
        rows[2] == "| p99 api: p99 latency < 250 ms | run | cluster | n/a | ⚠️ inconclusive | no response to measure |"
    )
    assert rows[3].endswith("| 120.0 ms | ✅ passed |  |")
    assert len(rows) == 4


def test_no_thresholds_no_table():
    assert "| threshold |" not in run_markdown(run_doc(), exit_code=0, run_dir="")


@pytest.mark.parametrize(
    ("steps", "line"),
    [
        ((), None),
        ((Step(name="main"),), "Generator: every step's figures are valid (the generator kept up)."),
        (
            (
                Step(name="s1"),
                Step(name="s2", generator_bound=True, validity="invalid"),
                Step(name="s3", validity="suspect"),
            ),
            "⚠️ Generator: generator-bound (the figures are the generator's limit, not the target's): s2; suspect: s3.",
        ),
    ],
)
def test_the_generator_validity_line_names_the_steps_that_measured_the_generator(steps, line):
    text = run_markdown(run_doc(steps=steps), exit_code=0, run_dir="runs/r1")
    found = [t for t in text.splitlines() if "Generator:" in t]
    assert found == ([line] if line else [])


def test_the_report_is_named_in_the_run_directory():
    text = run_markdown(run_doc(), exit_code=0, run_dir="runs/20261123-071223-c3c8/")
    assert text.splitlines()[-1] == "Report: `runs/20261123-071223-c3c8/report.html`"
    assert "Report:" not in run_markdown(run_doc(), exit_code=0, run_dir="")
