"""JUnit XML of a run's verdict and of a regression gate: the test report every CI system reads
(GitHub and GitLab reporters, Jenkins). Written with xml.etree, which escapes every text and
attribute; the shape is the Jenkins xunit plugin's junit-10.xsd (tests validate against it).

That schema allows no `<properties>` in a `<testcase>`, so a test case's figures go in its
suite's `<properties>`, named `CASE.figure`, and in words in the test case's `<system-out>`."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from loadfleet.controller.model.gateresult import GateFigure, GateOutcome, GateReport

from . import verdicttext

_CLASS = "loadfleet"  # each test case's classname: reporters group by it


@dataclass(frozen=True)
class _Case:
    """One test case: passed unless `failure` or `skipped` says why not."""

    name: str
    failure: str | None = None
    skipped: str | None = None
    out: str = ""


def gate_junit(report: GateReport) -> str:
    """The gate as a suite `gate`: one test case per gated figure (regression fails,
    inconclusive is skipped with its reason, pass and improvement pass), and one case
    "runs comparable" skipped when the runs could not be compared at all."""
    cases = [_gate_case(f) for f in report.figures]
    reasons = "; ".join(report.inconclusive_reasons)
    cases.append(_Case("runs comparable", skipped=reasons or None, out=report.method))
    properties = [("base_run", report.base_run), ("candidate_run", report.candidate_run), ("method", report.method)]
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
