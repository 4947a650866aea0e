"""--junit and --markdown on `loadfleet run`/`status`: the JUnit file fails exactly when the exit
code says the run did (1 or 4), the files are written when the summary arrives (also when the
verdict failed), whole, and a file that cannot be written is exit 2 before anything starts."""

from __future__ import annotations

import argparse
import asyncio
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from hypothesis import given, settings
from hypothesis import strategies as st

from loadfleet.controller.analysis.thresholds import describe_result
from loadfleet.controller.cli import main
from loadfleet.controller.cli.follow import exit_code_of, follow
from loadfleet.controller.cli.options import CiOutputs, add_ci_output_options, ci_outputs
from loadfleet.controller.model.errors import EXIT_BAD_INPUT, EXIT_THRESHOLD_FAILED, UsageError
from loadfleet.controller.model.summarydoc import Stop, SummaryDoc
from loadfleet.controller.model.thresholdresult import Outcome, RunVerdict, ThresholdResult
from loadfleet.controller.output.junit import run_junit
from loadfleet.v1 import run_pb2

SCHEMA = xmlschema.XMLSchema(Path(__file__).parents[2] / "support" / "junit" / "junit-10.xsd")


def result(outcome: Outcome, name: str) -> ThresholdResult:
    return ThresholdResult(name, f"{name} < 250 ms", "cluster", "run", 250.0, "ms", 100.0, outcome)


@st.composite
def summaries(draw: st.DrawFn) -> tuple[SummaryDoc, bool]:
    """A summary as the threshold watch writes one: the verdict fails for a failed threshold,
    and for an inconclusive one when the plan's rules say so; its reasons name them or not,
    and may name a failure no listed threshold holds."""
    outcomes = draw(st.lists(st.sampled_from(list(Outcome)), max_size=5))
    results = tuple(result(o, f"t{i}") for i, o in enumerate(outcomes))
    inconclusive_fails, named = draw(st.booleans()), draw(st.booleans())
    to_blame = [r for r in results if r.outcome is Outcome.FAILED or (inconclusive_fails and not r.passed)]
    reasons = tuple(describe_result(r) for r in to_blame) if named else ("a threshold failed",) * bool(to_blame)
    if draw(st.booleans()):  # a failure the verdict names but no listed threshold holds
        reasons += ("some response was ok",)
    verdict = None if draw(st.booleans()) and not results else RunVerdict(not reasons, reasons)
    doc = SummaryDoc(
        thresholds=results,
        verdict=verdict,
        incomplete_files=("intervals.csv",) if draw(st.booleans()) else (),
        stop=Stop("error rate 12 % > 5 %") if draw(st.booleans()) else None,
    )
    return doc, draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(summaries())
def test_the_junit_file_has_a_failure_exactly_when_the_exit_code_is_1_or_4(case):
    doc, run_failed = case
    xml = run_junit(doc, run_failed=run_failed)
    SCHEMA.validate(xml)
    has_failure = any(True for _ in ET.fromstring(xml).iter("failure"))
    assert has_failure == (exit_code_of(doc, run_failed=run_failed) in (1, 4))


# ------------------------------------------------------------------ the options


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_ci_output_options(p)
    return p.parse_args(argv)


def test_no_flags_no_files():
    assert ci_outputs(parse()) == CiOutputs()


def test_the_flags_read_as_paths(tmp_path):
    assert ci_outputs(parse("--junit", f"{tmp_path}/r.xml", "--markdown", f"{tmp_path}/s.md")) == CiOutputs(
        tmp_path / "r.xml", tmp_path / "s.md"
    )


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--junit", "{tmp}/no/such/dir/r.xml"), "--junit {tmp}/no/such/dir/r.xml: the directory {tmp}/no/such/dir"),
        (("--markdown", "{tmp}"), "--markdown {tmp}: is a directory"),
        (("--junit", "{tmp}/a", "--markdown", "{tmp}/a"), "--junit and --markdown name the same file"),
    ],
)
def test_a_file_that_cannot_be_written_is_named(tmp_path, argv, words):
    with pytest.raises(UsageError) as caught:
        ci_outputs(parse(*(a.format(tmp=tmp_path) for a in argv)))
    assert str(caught.value).startswith(words.format(tmp=tmp_path))


def test_status_says_so_with_exit_2_before_reaching_a_controller(tmp_path, capsys):
    # Port 9 of the loopback: nothing listens; the error must come before any call to it.
    code = main(["status", "r1", "--controller", "127.0.0.1:9", "--junit", str(tmp_path / "gone" / "r.xml")])
    assert code == EXIT_BAD_INPUT
    assert "--junit" in capsys.readouterr().err


# ------------------------------------------------------------------ follow writes them


class OneSummaryClient:
    """A controller that has a run end at once with this summary."""

    def __init__(self, doc: dict, state: int = run_pb2.RUN_STATE_FINISHED) -> None:
        self.summary = run_pb2.RunSummary(run_id="r1", state=state, run_dir="runs/r1", summary_json=json.dumps(doc))

    async def watch(self, run_id: str):
        yield run_pb2.RunUpdate(finished=self.summary)

    async def stop_run(self, run_id: str) -> None:
        raise AssertionError("nobody pressed Ctrl-C")


FAILED_DOC = {
    "run_id": "r1",
    "state": "finished",
    "thresholds": [
        {"name": "p99", "text": "p99 latency < 250 ms", "scope": "cluster", "over": "run", "limit": 250,
         "unit": "ms", "value": 312.4, "outcome": "failed"}
    ],
    "verdict": {"passed": False, "reasons": ["p99"]},
}  # fmt: skip


def follow_one(doc: dict, outputs: CiOutputs, as_json: bool = False) -> int:
    return asyncio.run(follow(OneSummaryClient(doc), "r1", as_json=as_json, outputs=outputs))  # type: ignore[arg-type]


def test_a_failed_verdict_exits_4_and_writes_both_files_whole(tmp_path, capsys):
    outputs = CiOutputs(tmp_path / "results.xml", tmp_path / "summary.md")
    code = follow_one(FAILED_DOC, outputs)
    assert code == EXIT_THRESHOLD_FAILED
    xml = (tmp_path / "results.xml").read_text(encoding="utf-8")
    SCHEMA.validate(xml)
    assert 'message="p99 latency &lt; 250 ms: 312.4 ms (run, cluster)"' in xml
    markdown = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert markdown.startswith("❌ **threshold failed** (exit 4): p99")
    assert "Report: `runs/r1/report.html`" in markdown
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.xml", "summary.md"]  # no temp file left


def test_an_earlier_file_is_replaced(tmp_path, capsys):
    (tmp_path / "results.xml").write_text("old")
    follow_one({"run_id": "r1"}, CiOutputs(tmp_path / "results.xml"), as_json=True)
    assert (tmp_path / "results.xml").read_text().startswith("<?xml")


def test_a_file_that_became_unwritable_during_the_run_is_a_usage_error_naming_it(tmp_path, capsys):
    outputs = CiOutputs(tmp_path / "gone" / "results.xml", tmp_path / "summary.md")
    with pytest.raises(UsageError, match=r"--junit .*results.xml: cannot write it"):
        follow_one(FAILED_DOC, outputs)
    assert (tmp_path / "summary.md").exists()  # the other file is still written
