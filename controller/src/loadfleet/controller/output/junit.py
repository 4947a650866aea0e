"""JUnit XML of a run's verdict and of a regression gate: the test report every CI system reads
(GitHub and GitLab reporters, Jenkins). Written with xml.etree, which escapes every text and
attribute; the shape is the Jenkins xunit plugin's junit-10.xsd (tests validate against it).

That schema allows no `<properties>` in a `<testcase>`, so a test case's figures go in its
suite's `<properties>`, named `CASE.figure`, and in words in the test case's `<system-out>`."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from loadfleet.controller.analysis.thresholds import describe_result
from loadfleet.controller.model import thresholdtext
from loadfleet.controller.model.gateresult import GateFigure, GateOutcome, GateReport
from loadfleet.controller.model.summarydoc import SummaryDoc
from loadfleet.controller.model.thresholdresult import Outcome, RunVerdict, ThresholdResult

from . import verdicttext

_CLASS = "loadfleet"  # each test case's classname: reporters group by it


@dataclass(frozen=True)
class _Case:
    """One test case: passed unless `failure` or `skipped` says why not."""

    name: str
    failure: str | None = None
    skipped: str | None = None
    out: str = ""


def run_junit(read: SummaryDoc, *, run_failed: bool) -> str:
    """A run as two suites: `thresholds`, one test case per threshold's result (the implicit
    "some response was ok" among them), and `run`, one test case "run finished" that fails when
    the run failed (`run_failed`: its state) or a full disk left its files incomplete.

    The file has a failure exactly when `loadfleet run`/`status` exits 1 or 4 (cli/follow.py's
    rule): a failed threshold fails its case, an inconclusive one fails only when the verdict
    failed because of it (else it is skipped), and a failed verdict that names no failing
    threshold still fails a case "verdict", so a red exit code is never a green report."""
    suites = [_thresholds_suite(read.thresholds, read.verdict), _suite("run", [_run_case(read, run_failed)])]
    # Checks (issue 30, J8): a suite `checks` goes here, one test case per request × check.
    return _document(suites)


def _thresholds_suite(results: tuple[ThresholdResult, ...], verdict: RunVerdict | None) -> ET.Element:
    blamed = _blamed(results, verdict)
    cases = [_threshold_case(r, r in blamed) for r in results]
    if verdict is not None and not verdict.passed and not any(c.failure for c in cases):
        reasons = "; ".join(verdict.reasons) or "the verdict failed"
        cases.append(_Case("verdict", failure=reasons))
    properties = []
    for r in results:
        properties += [(f"{r.name}.value", verdicttext.threshold_value(r)), (f"{r.name}.outcome", r.outcome.value)]
    return _suite("thresholds", cases, properties)


def _blamed(results: tuple[ThresholdResult, ...], verdict: RunVerdict | None) -> list[ThresholdResult]:
    """The inconclusive results the failed verdict is owed to: those whose sentence
    (analysis/thresholds.describe_result) is among its reasons; when it names none of them, all
    of them if no threshold failed outright (the verdict failed for them)."""
    if verdict is None or verdict.passed:
        return []
    inconclusive = [r for r in results if r.outcome is Outcome.INCONCLUSIVE]
    named = [r for r in inconclusive if describe_result(r) in verdict.reasons]
    if named or any(r.outcome is Outcome.FAILED for r in results):
        return named
    return inconclusive


def _threshold_case(result: ThresholdResult, blamed: bool) -> _Case:
    line = verdicttext.threshold_line(result)
    out = "\n".join([line, *thresholdtext.details(result)])
    if result.outcome is Outcome.FAILED or (result.outcome is Outcome.INCONCLUSIVE and blamed):
        return _Case(result.name, failure=line, out=out)
    if result.outcome is Outcome.INCONCLUSIVE:
        return _Case(result.name, skipped=f"inconclusive: {line}", out=out)
    return _Case(result.name, out=out)


def _run_case(read: SummaryDoc, run_failed: bool) -> _Case:
    out = f"run {read.run_id or '?'} of plan {read.plan_name or '?'}: {read.state or '?'}"
    if read.stop:
        out += f"; a stop condition ended it: {read.stop.text}"
    if run_failed:
        return _Case("run finished", failure=f"the run failed: {read.message or read.state or '?'}", out=out)
    if read.incomplete_files:
        files = ", ".join(read.incomplete_files)
        return _Case("run finished", failure=f"files left incomplete by a full disk: {files}", out=out)
    return _Case("run finished", out=out)


def gate_junit(report: GateReport) -> str:
    """The gate as a suite `gate`: one test case per gated figure (regression fails,
    inconclusive is skipped with its reason, pass and improvement pass), and one case
    "runs comparable" skipped when the runs could not be compared at all."""
    cases = [_gate_case(f) for f in report.figures]
    reasons = "; ".join(report.inconclusive_reasons)
    cases.append(_Case("runs comparable", skipped=reasons or None, out=report.method))
    properties = [
        ("base_run", report.base_run),
        ("baselines", str(report.baselines)),
        ("candidate_run", report.candidate_run),
        ("method", report.method),
    ]
    for figure in report.figures:
        properties += _gate_properties(figure)
    return _document([_suite("gate", cases, properties)])


def _gate_case(figure: GateFigure) -> _Case:
    line = verdicttext.gate_line(figure)
    name = f"{figure.figure} {figure.tolerance}"
    if figure.outcome is GateOutcome.REGRESSION:
        return _Case(name, failure=f"regression: {line}", out=line)
    if figure.outcome is GateOutcome.INCONCLUSIVE:
        return _Case(name, skipped=f"inconclusive: {figure.reason or line}", out=line)
    return _Case(name, out=f"{figure.outcome.value}: {line}")


def _gate_properties(figure: GateFigure) -> list[tuple[str, str]]:
    key = figure.figure
    return [
        (f"{key}.base", verdicttext.number(figure.base)),
        (f"{key}.candidate", verdicttext.number(figure.candidate)),
        (f"{key}.change", verdicttext.change(figure)),
        (f"{key}.ci95", verdicttext.interval(figure)),
        (f"{key}.outcome", figure.outcome.value),
    ]


# ------------------------------------------------------------------ the document


def _suite(name: str, cases: list[_Case], properties: Sequence[tuple[str, str]] = ()) -> ET.Element:
    suite = ET.Element(
        "testsuite",
        name=name,
        tests=str(len(cases)),
        failures=str(sum(c.failure is not None for c in cases)),
        errors="0",
        skipped=str(sum(c.skipped is not None and c.failure is None for c in cases)),
    )
    if properties:
        props = ET.SubElement(suite, "properties")
        for key, value in properties:
            ET.SubElement(props, "property", name=key, value=value)
    for case in cases:
        suite.append(_case_element(name, case))
    return suite


def _case_element(suite: str, case: _Case) -> ET.Element:
    element = ET.Element("testcase", name=case.name, classname=f"{_CLASS}.{suite}")
    if case.failure is not None:
        ET.SubElement(element, "failure", message=case.failure).text = case.failure
    elif case.skipped is not None:
        ET.SubElement(element, "skipped", message=case.skipped)
    if case.out:
        ET.SubElement(element, "system-out").text = case.out
    return element


def _document(suites: list[ET.Element]) -> str:
    root = ET.Element(
        "testsuites",
        name="loadfleet",
        tests=str(sum(int(s.get("tests", "0")) for s in suites)),
        failures=str(sum(int(s.get("failures", "0")) for s in suites)),
        errors="0",
    )
    root.extend(suites)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
