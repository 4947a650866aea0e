"""JUnit XML of a gate (and of a run): valid against the vendored junit-10.xsd, a failure exactly
where the exit code says one, every text escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from hypothesis import given
from hypothesis import strategies as st

from loadfleet.controller.analysis.thresholds import describe_result
from loadfleet.controller.model.errors import EXIT_THRESHOLD_FAILED
from loadfleet.controller.model.gateresult import GateFigure, GateOutcome, GateReport
from loadfleet.controller.model.summarydoc import Stop, SummaryDoc
from loadfleet.controller.model.thresholdresult import Outcome, RunVerdict, ThresholdResult
from loadfleet.controller.output.junit import gate_junit, run_junit

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
        base_runs=("20261123-071223-c3c8",),
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


# ------------------------------------------------------------------ a run


def result(outcome: Outcome, name: str = "p99", reason: str = "") -> ThresholdResult:
    return ThresholdResult(
        name=name,
        text="p99 latency < 250 ms",
        scope="cluster",
        over="run",
        limit=250.0,
        unit="ms",
        value=312.4 if outcome is Outcome.FAILED else 120.0,
        outcome=outcome,
        reason=reason,
    )


INCONCLUSIVE = result(Outcome.INCONCLUSIVE, reason="no response to measure")


def run_doc(*results: ThresholdResult, verdict: RunVerdict | None = None, **fields) -> SummaryDoc:
    return SummaryDoc(run_id="r1", plan_name="quick", state="finished", thresholds=results, verdict=verdict, **fields)


def suite_cases(xml: str, suite: str) -> dict[str, ET.Element]:
    found = next(s for s in ET.fromstring(xml).iter("testsuite") if s.get("name") == suite)
    return {c.get("name", ""): c for c in found.iter("testcase")}


def test_a_failed_threshold_fails_its_case_with_the_limit_the_value_and_where():
    xml = run_junit(run_doc(result(Outcome.FAILED), verdict=RunVerdict(False, ("p99",))), run_failed=False)
    SCHEMA.validate(xml)
    failure = suite_cases(xml, "thresholds")["p99"].find("failure")
    assert failure is not None
    assert failure.get("message") == "p99 latency < 250 ms: 312.4 ms (run, cluster)"
    assert suite_cases(xml, "run")["run finished"].find("failure") is None


@pytest.mark.parametrize(
    ("verdict", "others", "tag"),
    [
        (RunVerdict(False, (describe_result(INCONCLUSIVE),)), (), "failure"),  # the verdict names it
        (RunVerdict(False, (describe_result(INCONCLUSIVE), "ok failed")), (Outcome.FAILED,), "failure"),
        (RunVerdict(False, ("some reason in other words",)), (), "failure"),  # nothing else failed
        (RunVerdict(False, ("ok failed",)), (Outcome.FAILED,), "skipped"),  # the verdict failed for another
        (RunVerdict(True), (), "skipped"),  # the plan lets inconclusive pass
    ],
)
def test_an_inconclusive_threshold_fails_only_when_the_verdict_failed_because_of_it(verdict, others, tag):
    results = (INCONCLUSIVE, *(result(o, name="ok") for o in others))
    xml = run_junit(run_doc(*results, verdict=verdict), run_failed=False)
    SCHEMA.validate(xml)
    case = suite_cases(xml, "thresholds")["p99"]
    assert [c.tag for c in case if c.tag in ("failure", "skipped")] == [tag]


def test_a_failed_verdict_naming_no_threshold_still_fails_a_case():
    xml = run_junit(
        run_doc(result(Outcome.PASSED), verdict=RunVerdict(False, ("no response was ok",))), run_failed=False
    )
    failure = suite_cases(xml, "thresholds")["verdict"].find("failure")
    assert failure is not None and failure.get("message") == "no response was ok"


@pytest.mark.parametrize(
    ("run_failed", "fields", "message"),
    [
        (True, {"message": "agent a1 lost"}, "the run failed: agent a1 lost"),
        (False, {"incomplete_files": ("intervals.csv",)}, "files left incomplete by a full disk: intervals.csv"),
        (False, {"stop": Stop("error rate 12 % > 5 %")}, None),
        (False, {}, None),
    ],
)
def test_the_run_case_fails_when_the_run_failed_or_its_files_are_incomplete(run_failed, fields, message):
    xml = run_junit(run_doc(**fields), run_failed=run_failed)
    SCHEMA.validate(xml)
    case = suite_cases(xml, "run")["run finished"]
    failure = case.find("failure")
    assert (failure.get("message") if failure is not None else None) == message
    if "stop" in fields:
        assert "a stop condition ended it: error rate 12 % > 5 %" in (case.findtext("system-out") or "")


def test_a_summary_before_verdicts_has_an_empty_thresholds_suite_and_is_valid():
    xml = run_junit(SummaryDoc(), run_failed=False)
    SCHEMA.validate(xml)
    assert suite_cases(xml, "thresholds") == {}
