"""docs/reproductions/findings.yaml read into frozen `Finding`s (the file's header documents the
fields; tests/e2e/test_reproduction_findings.py checks their form)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class Finding:
    study: str
    id: str
    text: str
    metric: str
    comparison: str
    threshold: object  # a number, a name (==) or a (low, high) pair (between)
    threshold_basis: str
    kind: str
    reproducible_here: str
    note: str = ""
    paper_value: float | None = None


def finding_from_dict(entry: dict) -> Finding:
    threshold = entry["threshold"]
    if isinstance(threshold, list):
        threshold = tuple(threshold)
    return Finding(
        study=str(entry["study"]),
        id=entry["id"],
        text=entry["text"],
        metric=entry["metric"],
        comparison=entry["comparison"],
        threshold=threshold,
        threshold_basis=entry["threshold_basis"],
        kind=entry["kind"],
        reproducible_here=str(entry["reproducible_here"]),
        note=entry.get("note", ""),
        paper_value=entry.get("paper_value"),
    )


def load_findings(path: Path, study: str | None = None) -> list[Finding]:
    """Every finding of the file, or of one study, in the file's order."""
    entries = yaml.safe_load(Path(path).read_text())["findings"]
    findings = [finding_from_dict(e) for e in entries]
    return [f for f in findings if study is None or f.study == study]
