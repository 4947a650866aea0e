"""docs/reproductions/findings.yaml, the papers' findings as predicates, stays well-formed: every
entry has its fields, a known comparison with a threshold of the right shape, and a source naming
a paper's file (by name only: the papers themselves are not in the repository). Fast: reads YAML."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FINDINGS = REPO / "docs" / "reproductions" / "findings.yaml"
DOC = REPO / "docs" / "reproductions.md"

STUDIES = {"000", "001", "002", "003", "004"}
REQUIRED = {
    "study",
    "id",
    "text",
    "metric",
    "comparison",
    "threshold",
    "threshold_basis",
    "kind",
    "reproducible_here",
    "source",
}
OPTIONAL = {"paper_value", "note"}
COMPARISONS = {"<", "<=", ">", ">=", "==", "between"}
BASES = {"paper", "direction", "judgement", "hypothesis"}
KINDS = {"relative", "absolute"}
REPRODUCIBLE = {"yes", "partly", "no"}
PAPER_FILE = re.compile(r"^(\d{3})_[0-9a-f]{16}\.txt$")
ID = re.compile(r"^(\d{3})-[a-z0-9]+(-[a-z0-9]+)*$")


def number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def load() -> list[dict]:
    data = yaml.safe_load(FINDINGS.read_text())
    assert isinstance(data, dict) and set(data) == {"findings"}, "the file is a mapping with one key, `findings`"
    assert isinstance(data["findings"], list) and data["findings"], "`findings` is a non-empty list"
    return data["findings"]


FINDINGS_LIST = load()


def test_ids_are_unique_and_every_study_has_findings():
    ids = [f.get("id") for f in FINDINGS_LIST]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert {f.get("study") for f in FINDINGS_LIST} == STUDIES


@pytest.mark.parametrize("finding", FINDINGS_LIST, ids=lambda f: str(f.get("id")))
def test_the_finding_is_well_formed(finding):
    assert isinstance(finding, dict)
    assert set(finding) >= REQUIRED, f"missing {sorted(REQUIRED - set(finding))}"
    assert set(finding) <= REQUIRED | OPTIONAL, f"unknown {sorted(set(finding) - REQUIRED - OPTIONAL)}"

    study = finding["study"]
    assert study in STUDIES, f'study {study!r} (quote it: "000")'
    match = ID.match(finding["id"])
    assert match and match.group(1) == study, f"id {finding['id']!r} must be {study}-<slug>"
    for field in ("text", "metric"):
        assert isinstance(finding[field], str) and finding[field].strip(), f"{field} is empty"

    comparison, threshold = finding["comparison"], finding["threshold"]
    assert comparison in COMPARISONS, f"comparison {comparison!r} not in {sorted(COMPARISONS)}"
    if comparison == "between":
        assert isinstance(threshold, list) and len(threshold) == 2 and all(map(number, threshold)), (
            "between takes [low, high]"
        )
        assert threshold[0] < threshold[1]
    elif comparison == "==":
        assert number(threshold) or (isinstance(threshold, str) and threshold), "== takes a number or a name"
    else:
        assert number(threshold), f"{comparison} takes a number"
    if "paper_value" in finding:
        assert number(finding["paper_value"])

    assert finding["threshold_basis"] in BASES
    assert finding["kind"] in KINDS
    assert finding["reproducible_here"] in REPRODUCIBLE, "quote yes/no: YAML reads them as booleans"
    if finding["reproducible_here"] != "yes":
        assert isinstance(finding.get("note"), str) and finding["note"].strip(), "say why it is not reproducible"

    source = finding["source"]
    assert isinstance(source, dict) and {"file", "where"} <= set(source) <= {"file", "where", "quote"}
    file_match = PAPER_FILE.match(str(source["file"]))
    assert file_match, f"source.file {source['file']!r} is not NNN_<16 hex>.txt"
    assert file_match.group(1) == study, "the source is the study's own paper"
    assert isinstance(source["where"], str) and source["where"].strip()


def test_the_doc_references_the_file_and_every_finding():
    doc = DOC.read_text()
    assert "reproductions/findings.yaml" in doc
    missing = [f["id"] for f in FINDINGS_LIST if f"`{f['id']}`" not in doc]
    assert not missing, f"docs/reproductions.md does not list {missing}"
