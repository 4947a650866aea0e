"""Markdown of a gate (and of a run): the verdict line the exit code calls for, one table row per
figure, cells that cannot break the table."""

from __future__ import annotations

import pytest

from loadfleet.controller.model.gateresult import GateFigure, GateOutcome, GateReport
from loadfleet.controller.output.markdown import gate_markdown


def figure(outcome: GateOutcome, name: str = "p99_ms", reason: str = "") -> GateFigure:
    return GateFigure(name, "+10%", 200.0, 224.6, 12.3, 8.1, 16.0, True, outcome, reason)


def report(*figures: GateFigure, reasons: tuple[str, ...] = ()) -> GateReport:
    return GateReport("base-run", "cand-run", figures, "moving-block bootstrap", reasons)


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
