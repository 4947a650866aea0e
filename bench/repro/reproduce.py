"""Runs a reproduction of docs/reproductions.md on the lab, keeps its evidence, checks its findings.

From the repository's root, with the project's interpreter (.venv/bin/python):

    python -m bench.repro.reproduce 001                  lab up, cells interleaved x --repeat,
                                                         evidence stored, verdicts
    python -m bench.repro.reproduce 001 --evaluate-only  verdicts from the evidence already stored
    python -m bench.repro.reproduce all --tables         verdicts, and
                                                         docs/reproductions/<study>/tables.md written

Exit status: 0 the findings were evaluated (whatever they say); 1 a lab or a run failed (what ran
is stored and evaluated all the same); 2 bad usage or unreadable findings/evidence; 3 nothing to
evaluate (no stored runs of the study).
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from pathlib import Path

from bench.repro.reprokit.evidence import EvidenceError, read_observations, stored_runs
from bench.repro.reprokit.findings import load_findings
from bench.repro.reprokit.runner import RunnerError, RunOptions, run_study
from bench.repro.reprokit.studies import STUDIES
from bench.repro.reprokit.tables import study_tables
from bench.repro.reprokit.verdicts import Status, evaluate_findings, format_value

REPO = Path(__file__).resolve().parents[2]
DEFAULT_EVIDENCE = REPO / "docs" / "reproductions"
DEFAULT_FINDINGS = DEFAULT_EVIDENCE / "findings.yaml"
DEFAULT_REPEAT = 3
EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT, EXIT_NO_EVIDENCE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # as a shell reports Ctrl-C


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _interrupt(signum, frame) -> None:
    # Once: a second signal must not cut the labs' teardown short (SIGKILL still does).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def stop_like_ctrl_c() -> None:
    """SIGTERM and SIGINT stop a run as Ctrl-C does: the run in progress is killed and the labs
    come down. Without this a background job (started with `&`, so SIGINT ignored) could only be
    killed, leaving its labs' servers up."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Run a study's reproduction on the lab (servers interleaved, repeated), store each run's "
        "summary.json/steps.csv under docs/reproductions/<study>/, and evaluate the study's findings.",
        epilog="exit status: 0 evaluated, 1 a lab or run failed, 2 bad input, 3 no stored runs, "
        "130 interrupted (SIGINT or SIGTERM: the run in progress is killed, the labs come down). "
        "example: python -m bench.repro.reproduce 001 --repeat 2 --tables",
    )
    parser.add_argument("study", choices=[*sorted(STUDIES), "all"], help="study id (000..004) or all")
    parser.add_argument(
        "--repeat",
        type=int,
        default=DEFAULT_REPEAT,
        help=f"passes over the study's cells, interleaved (default {DEFAULT_REPEAT})",
    )
    parser.add_argument("--evaluate-only", action="store_true", help="run nothing: evaluate the stored evidence")
    parser.add_argument(
        "--tables", action="store_true", help="write docs/reproductions/<study>/tables.md from the stored evidence"
    )
    parser.add_argument("--step-s", type=float, help="override the study's step length (s)")
    parser.add_argument("--warmup-s", type=float, help="override the study's warm-up per step (s)")
    parser.add_argument("--evidence-dir", type=Path, default=DEFAULT_EVIDENCE, help="where evidence is stored")
    parser.add_argument("--findings", type=Path, default=DEFAULT_FINDINGS, help="the findings file")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=REPO / "build" / "repro",
        help="derived plans and whole run directories (not kept in git)",
    )
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON on stdout")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def print_verdicts(study_id: str, verdicts) -> None:
    counts = {s: sum(v.status is s for v in verdicts) for s in Status}
    print(
        f"study {study_id}: {counts[Status.HOLDS]} hold, {counts[Status.FAILS]} fail, "
        f"{counts[Status.NOT_ENOUGH_PASSES]} have not enough passes, "
        f"{counts[Status.NOT_EVALUABLE]} cannot be evaluated"
    )
    for verdict in verdicts:
        passes = f" ({verdict.reason})" if verdict.reason else ""
        if verdict.status is Status.NOT_EVALUABLE:
            why = verdict.reason
            if verdict.finding.reproducible_here != "yes":
                why += f" [on this lab: {verdict.finding.reproducible_here}]"
            print(f"  {verdict.status.value.upper():17} {verdict.finding.id}: {why}")
        else:
            print(
                f"  {verdict.status.value.upper():17} {verdict.finding.id}: {format_value(verdict.value)} "
                f"{verdict.finding.comparison} {verdict.finding.threshold}{passes}"
            )


def json_value(value):
    """A verdict's value as strict JSON takes it: an infinite first_error_s (no error in the run)
    becomes "inf", which JSON has no number for."""
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def verdicts_json(study_id: str, verdicts) -> dict:
    return {
        "study": study_id,
        "verdicts": [
            {
                "id": v.finding.id,
                "status": v.status.value,
                "value": json_value(v.value),
                "reason": v.reason,
                "passes": [{"pass": p, "status": s.value, "value": json_value(val)} for p, s, val in v.passes],
            }
            for v in verdicts
        ],
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    studies = sorted(STUDIES) if args.study == "all" else [args.study]
    try:
        findings = load_findings(args.findings)
    except (OSError, KeyError, ValueError) as exc:
        log(f"reproduce: cannot read {args.findings}: {exc}")
        return EXIT_BAD_INPUT
    status = EXIT_OK if args.evaluate_only else run_studies(args, studies)
    if status == EXIT_INTERRUPTED:
        return status
    try:
        documents, evaluated_any = evaluate_studies(args, studies, findings)
    except EvidenceError as exc:
        log(f"reproduce: {exc}")
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(documents if len(documents) != 1 else documents[0], indent=1, allow_nan=False))
    if status == EXIT_OK and not evaluated_any:
        return EXIT_NO_EVIDENCE
    return status


def run_studies(args: argparse.Namespace, studies: list[str]) -> int:
    """Runs the studies on the lab, one after the other: EXIT_OK, EXIT_RUN_FAILED when a lab or
    a run failed (the others still run), EXIT_INTERRUPTED at once on Ctrl-C."""
    sweep = {k: v for k, v in (("step_s", args.step_s), ("warmup_s", args.warmup_s)) if v is not None}
    options = RunOptions(
        repo=REPO, evidence_dir=args.evidence_dir, work_dir=args.work_dir, repeat=args.repeat, sweep=sweep
    )
    status = EXIT_OK
    for study_id in studies:
        try:
            failures = run_study(STUDIES[study_id], options, log)
        except KeyboardInterrupt:
            log(f"reproduce: study {study_id} interrupted; the runs it finished are stored")
            return EXIT_INTERRUPTED
        except (RunnerError, OSError) as exc:
            log(f"reproduce: study {study_id}: {exc}")
            failures = [str(exc)]
        if failures:
            log(f"reproduce: study {study_id}: {len(failures)} run(s) failed")
            status = EXIT_RUN_FAILED
    return status


def evaluate_studies(args: argparse.Namespace, studies: list[str], findings: list) -> tuple[list[dict], bool]:
    """Each study's findings against its stored runs: printed, or returned as JSON documents
    (--json), and written to its tables.md (--tables); and whether any study had stored runs.
    Raises EvidenceError on evidence it cannot read."""
    documents, evaluated_any = [], False
    for study_id in studies:
        study_dir = args.evidence_dir / study_id
        runs = stored_runs(study_dir)
        observations = read_observations(study_dir)
        verdicts = evaluate_findings([f for f in findings if f.study == study_id], observations)
        if not runs:
            log(f"reproduce: study {study_id}: no stored runs in {study_dir}")
        evaluated_any |= bool(runs)
        if args.json:
            documents.append(verdicts_json(study_id, verdicts))
        else:
            print_verdicts(study_id, verdicts)
        if args.tables and runs:
            out = study_dir / "tables.md"
            study = STUDIES[study_id]
            out.write_text(study_tables(study_id, study.title, runs, verdicts, study.note, observations, study_dir))
            log(f"wrote {out}")
    return documents, evaluated_any


if __name__ == "__main__":
    stop_like_ctrl_c()
    sys.exit(main())
