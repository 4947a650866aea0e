"""report.html's Verdict: first, the console's verdict line and a row per threshold, the
failed ones red with their failing steps; no section for a run without thresholds."""

from __future__ import annotations

import json
import re
from dataclasses import asdict

from loadfleet.controller.model.thresholdresult import Outcome, RunVerdict, ThresholdResult
from loadfleet.controller.output.report import REPORT_FILE, write_report
from loadfleet.controller.output.report.verdict import VERDICT_HEADERS

RESULTS = (
    ThresholdResult(
        "p99 latency < 250 ms",
        "p99 latency < 250 ms",
        "cluster",
        "step",
        250.0,
        "ms",
        312.4,
        Outcome.FAILED,
        failing_steps=("s2", "s3"),
        aborted=True,
    ),
    ThresholdResult("error % < 1", "error % < 1", "target <app>", "run", 1.0, "%", 0.25, Outcome.PASSED),
    ThresholdResult(
        "p99 latency < 9 ms",
        "p99 latency < 9 ms",
        "request account",
        "window 30 s",
        9.0,
        "ms",
        None,
        Outcome.INCONCLUSIVE,
        reason="no response to measure",
    ),
)


def _with_thresholds(run_dir, results, verdict) -> str:
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text())
    summary["thresholds"] = [asdict(r) for r in results]
    summary["verdict"] = asdict(verdict) if verdict else None
    path.write_text(json.dumps(summary))  # as RunSummary.to_json writes them
    write_report(run_dir)
    return (run_dir / REPORT_FILE).read_text()


def _rows(html: str) -> list[tuple[str, list[str]]]:
    body = html.split('<table class="thresholds">')[1].split("</table>")[0]
    return [
        (cls or "", re.findall(r"<td>(.*?)</td>", cells))
        for cls, cells in re.findall(r'<tr(?: class="(\w+)")?>(.*?)</tr>', body.split("<tbody>")[1])
    ]


def test_the_verdict_comes_first_with_each_threshold_and_the_failed_ones_in_red(synthetic_run):
    html = _with_thresholds(synthetic_run, RESULTS, RunVerdict(passed=False, reasons=("p99 latency < 250 ms",)))
    assert html.index("<h2>Verdict</h2>") < html.index("<h2>Summary</h2>")
    assert '<p class="verdict bad">verdict: failed — 1 of 3 thresholds failed, 1 inconclusive (exit 4)</p>' in html
    head = html.split('<table class="thresholds">')[1].split("</thead>")[0]
    assert re.findall(r"<th>(.*?)</th>", head) == list(VERDICT_HEADERS)
    (failed_class, failed), (passed_class, passed), (_, inconclusive) = _rows(html)
    assert failed_class == "failed" and passed_class == "passed"
    assert failed == [
        "p99 latency &lt; 250 ms",
        "cluster",
        "step",
        "312.40 ms",
        "FAILED (ended the run early)",
        "s2, s3",
    ]
    assert passed[1] == "target &lt;app&gt;" and passed[3:] == ["0.25 %", "PASSED", "-"]
    assert inconclusive[3:5] == ["-", "INCONCLUSIVE (no response to measure)"]  # the value of nothing
    assert "tr.failed td { color: #b00; }" in html


def test_a_passed_verdict_is_said_and_a_run_without_thresholds_has_no_verdict(synthetic_run):
    assert "Verdict" not in (synthetic_run / REPORT_FILE).read_text()
    html = _with_thresholds(synthetic_run, RESULTS[1:2], RunVerdict(passed=True))
    assert '<p class="verdict good">verdict: passed — 0 of 1 threshold failed</p>' in html
    assert [cls for cls, _ in _rows(html)] == ["passed"]
    html = _with_thresholds(synthetic_run, (), None)
    assert "Verdict" not in html
