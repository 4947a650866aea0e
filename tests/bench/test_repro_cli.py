"""bench.repro.reproduce without running anything: exit codes of --evaluate-only, and the kept
evidence of every study still gives the verdicts and tables committed beside it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from bench.repro import reproduce as cli
from bench.repro.reprokit.evidence import read_observations, stored_runs
from bench.repro.reprokit.findings import load_findings
from bench.repro.reprokit.studies import STUDIES
from bench.repro.reprokit.tables import study_tables
from bench.repro.reprokit.verdicts import evaluate_findings
from support.procs import REPO, program

pytestmark = pytest.mark.process  # starts real processes (tests/conftest.py)

EVIDENCE = REPO / "docs" / "reproductions"


def test_exit_codes_of_evaluate_only(tmp_path, capsys):
    assert cli.main(["001", "--evaluate-only", "--evidence-dir", str(tmp_path)]) == cli.EXIT_NO_EVIDENCE
    assert "12 cannot be evaluated" in capsys.readouterr().out
    assert cli.main(["001", "--evaluate-only", "--findings", str(tmp_path / "none.yaml")]) == cli.EXIT_BAD_INPUT
    broken = tmp_path / "001" / "run-1"
    broken.mkdir(parents=True)
    (broken / "cell.json").write_text("{not json")
    assert cli.main(["001", "--evaluate-only", "--evidence-dir", str(tmp_path)]) == cli.EXIT_BAD_INPUT
    with pytest.raises(SystemExit):
        cli.main(["009", "--evaluate-only"])


STORED = [s for s in sorted(STUDIES) if (EVIDENCE / s / "tables.md").exists()]


@pytest.mark.parametrize("study", STORED)
def test_the_kept_evidence_gives_the_committed_tables(study):
    """tables.md is what the stored runs give today: regenerate it (reproduce.py STUDY --evaluate-only
    --tables) after changing the evaluator, the findings or the evidence."""
    runs, observations = stored_runs(EVIDENCE / study), read_observations(EVIDENCE / study)
    verdicts = evaluate_findings(load_findings(EVIDENCE / "findings.yaml", study), observations)
    expected = study_tables(
        study, STUDIES[study].title, runs, verdicts, STUDIES[study].note, observations, EVIDENCE / study
    )
    assert (EVIDENCE / study / "tables.md").read_text() == expected
    for cell, _summary in runs:
        assert {"study", "cell", "vars", "pass", "run_id", "levels", "command"} <= set(cell)
        kept = sorted(p.name for p in (EVIDENCE / study / cell["run_id"]).iterdir())
        small = ["cell.json", "plan.yaml", "steps.csv", "summary.json"]
        assert kept in (small, sorted([*small, "cluster_intervals.csv"])), "small files only"


def test_json_output(capsys):
    assert cli.main(["001", "--evaluate-only", "--json"]) in (cli.EXIT_OK, cli.EXIT_NO_EVIDENCE)
    document = json.loads(capsys.readouterr().out)
    assert document["study"] == "001" and len(document["verdicts"]) == 12


def test_an_infinite_value_is_written_as_strict_json():
    assert cli.json_value({"erlang": float("inf"), "apache": 84.0}) == {"erlang": "inf", "apache": 84.0}
    assert json.loads(json.dumps(cli.json_value(float("-inf")), allow_nan=False)) == "-inf"


def test_a_signal_stops_a_study_in_the_background_and_brings_its_lab_down(tmp_path):
    """A study started as a background job (SIGINT ignored, as a shell does for `&`) and sent
    SIGINT while its first run is under way: exit 130, the run killed, the lab down, and a
    SIGTERM during the teardown does not cut it short."""
    study = STUDIES["003"]  # the quickest lab to start: Apache worker and Yaws
    state_dir = REPO / study.labs[0].state_dir
    command = [
        sys.executable,
        "-m",
        "bench.repro.reproduce",
        "003",
        "--repeat",
        "1",
        "--evidence-dir",
        str(tmp_path / "evidence"),
        "--work-dir",
        str(tmp_path / "work"),
    ]
    ignore_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)  # noqa: E731
    with subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=ignore_sigint
    ) as proc:
        try:
            assert proc.stderr is not None
            output = []
            for line in proc.stderr:
                output.append(line)
                if line.startswith("[study 003 pass 1/1"):  # the lab is up, a run started
                    break
            proc.send_signal(signal.SIGINT)
            output.append(proc.stderr.readline())  # "lab down: ...": the teardown has begun
            proc.terminate()
            _, rest = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            status = subprocess.run(
                [program("loadfleet-lab"), "status", "--state-dir", str(state_dir)], capture_output=True, text=True
            )
            # the lab down whatever happened; its status was read first, for the assertion below
            subprocess.run([program("loadfleet-lab"), "down", "--state-dir", str(state_dir)], capture_output=True)
    text = "".join(output) + rest
    assert proc.returncode == 130, text
    assert f"lab down: {study.labs[0].state_dir}" in text and "interrupted" in text
    assert "no lab in this state directory" in status.stdout + status.stderr, status.stdout
    assert not list((tmp_path / "evidence").glob("003/*/summary.json"))  # the killed run is not stored
