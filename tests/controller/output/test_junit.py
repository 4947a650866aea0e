"""JUnit XML of a gate (and of a run): valid against the vendored junit-10.xsd, a failure exactly
where the exit code says one, every text escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from hypothesis import given
from hypothesis import strategies as st

from loadfleet.controller.model.errors import EXIT_THRESHOLD_FAILED
from loadfleet.controller.model.gateresult import GateFigure, GateOutcome, GateReport
from loadfleet.controller.output.junit import gate_junit

SCHEMA = xmlschema.XMLSchema(Path(__file__).parents[2] / "support" / "junit" / "junit-10.xsd")


def figure(outcome: GateOutcome, name: str = "p99_ms", reason: str = "") -> GateFigure:
    return GateFigure(
        figure=name,
        tolerance="+10%",
        base=200.0,
        candidate=224.6,
        change=12.3,
        low=8.1,
        high=16.0,
        relative=True,
        outcome=outcome,
        reason=reason,
    )


def report(*figures: GateFigure, reasons: tuple[str, ...] = ()) -> GateReport:
    return GateReport(
        base_run="20261123-071223-c3c8",
        candidate_run="20261124-081500-a1b2",
        figures=figures,
        method="moving-block bootstrap, 2,000 resamples, 95 % interval",
        inconclusive_reasons=reasons,
    )


def cases(xml: str) -> dict[str, ET.Element]:
    return {c.get("name", ""): c for c in ET.fromstring(xml).iter("testcase")}


@pytest.mark.parametrize(
    ("outcome", "child", "message"),
    [
        (GateOutcome.REGRESSION, "failure", "regression: p99_ms +12.3 % [+8.1 %, +16.0 %], tolerance +10%"),
        (GateOutcome.INCONCLUSIVE, "skipped", "inconclusive: 12 measured intervals, fewer than 20"),
        (GateOutcome.PASS, None, None),
        (GateOutcome.IMPROVEMENT, None, None),
    ],
)
def test_each_gated_figure_is_a_test_case_its_outcome_decides(outcome, child, message):
    xml = gate_junit(
        report(figure(outcome, reason="12 measured intervals, fewer than 20" if child == "skipped" else ""))
    )
    SCHEMA.validate(xml)
    case = cases(xml)["p99_ms +10%"]
    found = [c for c in case if c.tag in ("failure", "skipped")]
    if child is None:
        assert found == []
    else:
        assert [c.tag for c in found] == [child]
        assert found[0].get("message", "").startswith(message)


def test_the_suite_names_both_runs_and_each_figures_numbers_in_its_properties():
    xml = gate_junit(report(figure(GateOutcome.REGRESSION), figure(GateOutcome.PASS, name="ok_rps")))
    SCHEMA.validate(xml)
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None and suite.get("name") == "gate"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["base_run"] == "20261123-071223-c3c8"
    assert props["p99_ms.base"] == "200.0" and props["p99_ms.candidate"] == "224.6"
    assert props["p99_ms.change"] == "+12.3 %" and props["p99_ms.ci95"] == "[+8.1 %, +16.0 %]"
    assert props["ok_rps.outcome"] == "pass"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "0")


def test_runs_that_cannot_be_compared_skip_a_case_with_the_reasons():
    xml = gate_junit(report(reasons=("plans differ: rate", "run 2 not finished")))
    SCHEMA.validate(xml)
    skipped = cases(xml)["runs comparable"].find("skipped")
    assert skipped is not None and skipped.get("message") == "plans differ: rate; run 2 not finished"


def test_text_that_is_markup_is_escaped_not_interpreted():
    reason = 'a <b> & "c" ]]> \' plan'
    xml = gate_junit(report(figure(GateOutcome.INCONCLUSIVE, name="p99<ms>&", reason=reason)))
    SCHEMA.validate(xml)
    assert "p99&lt;ms&gt;&amp;" in xml
    case = cases(xml)["p99<ms>& +10%"]
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("message") == f"inconclusive: {reason}"


def test_a_figure_a_run_did_not_measure_reads_na():
    none = GateFigure("p99_ms", "+10%", None, None, None, None, None, True, GateOutcome.INCONCLUSIVE, "no ok response")
    xml = gate_junit(report(none))
    SCHEMA.validate(xml)
    assert "n/a" in (cases(xml)["p99_ms +10%"].findtext("system-out") or "")


@given(st.lists(st.sampled_from(list(GateOutcome)), max_size=6), st.booleans())
def test_the_gate_junit_has_a_failure_exactly_when_the_gate_exits_4(outcomes, not_comparable):
    rep = report(
        *(figure(o, name=f"f{i}") for i, o in enumerate(outcomes)), reasons=("plans differ",) if not_comparable else ()
    )
    xml = gate_junit(rep)
    SCHEMA.validate(xml)
    has_failure = any(True for _ in ET.fromstring(xml).iter("failure"))
    assert has_failure == (rep.exit_code == EXIT_THRESHOLD_FAILED)
