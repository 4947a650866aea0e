"""`loadfleet compare`: runs side by side, as a table (or JSON) and an HTML file of their curves;
with `--gate`, the regression gate on a candidate run against one or more baseline runs
(analysis/gate.py): a verdict per gated figure
and the exit code 0 (pass or improvement), 4 (a regression) or 5 (inconclusive)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from loadfleet.controller.analysis.gate import RECOMMENDED_BASELINES, judge_runs
from loadfleet.controller.analysis.gaterun import read_gate_run
from loadfleet.controller.analysis.gatespec import check_request_gates, parse_gate
from loadfleet.controller.model.errors import EXIT_INCONCLUSIVE, EXIT_OK, UsageError
from loadfleet.controller.model.gateresult import GateReport
from loadfleet.controller.output import report
from loadfleet.controller.output.junit import gate_junit
from loadfleet.controller.output.markdown import gate_markdown
from loadfleet.controller.output.report.compare import gate_text

from ..options import Subcommands, ci_outputs

# Options that mean something only with --gate: (attribute, flag).
_GATE_ONLY = (
    ("gate_request", "--gate-request"),
    ("allow_plan_change", "--allow-plan-change"),
    ("inconclusive_ok", "--inconclusive-ok"),
    ("junit", "--junit"),
    ("markdown", "--markdown"),
)


def add_parser(commands: Subcommands, name: str) -> None:
    p = commands.add_parser(
        name,
        help="compare runs side by side (table, and HTML with overlaid curves), or gate a change (--gate)",
        description="Print the runs' totals side by side (changes against the first run) and write\n"
        "an HTML file with their req/s and p99 curves overlaid, aligned at their start.\n\n"
        "With --gate, judge whether the last run (the candidate) got worse than the others\n"
        "(baseline runs of the same plan) beyond a tolerance, with a 95 % confidence interval;\n"
        f"with 2 or more baselines ({RECOMMENDED_BASELINES} or more recommended) the interval includes\n"
        "the variance between runs.\n"
        "Exit 0 pass or improvement, 4 regression, 5 inconclusive, 2 bad input (docs/ci.md).",
        epilog="examples:\n  loadfleet compare runs/A runs/B --out before-after.html\n"
        "  loadfleet compare runs/base runs/new --gate p99_ms:+10% --gate error_pct:+0.5 --gate ok_rps:-5%\n"
        "  loadfleet compare baseline/* runs/new --gate p90_ms:+10%   (several baselines)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR", help="two or more run directories")
    p.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help=f"HTML file to write (default {report.DEFAULT_COMPARE_FILE}; with --gate none unless given)",
    )
    p.add_argument("--json", action="store_true", help="print the table (or the gate's report) as JSON")
    _add_gate_options(p)


def _add_gate_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("regression gate (runs: BASE... CANDIDATE, the baselines runs of one plan)")
    g.add_argument(
        "--gate",
        action="append",
        default=[],
        metavar="FIGURE:TOLERANCE",
        help="a figure and the change allowed on its bad side: p99_ms:+10%% (relative), error_pct:+0.5 "
        "(absolute), ok_rps:-5%%; figures p50_ms p90_ms p95_ms p99_ms p999_ms mean_ms max_ms error_pct "
        "rps ok_rps (repeat --gate for several)",
    )
    g.add_argument(
        "--gate-request",
        metavar="NAME",
        help="gate one request's figures (over all targets) instead of the cluster's; no percentiles",
    )
    g.add_argument(
        "--allow-plan-change",
        action="store_true",
        help="judge runs of plans that differ (by default inconclusive, the keys listed)",
    )
    g.add_argument("--inconclusive-ok", action="store_true", help="exit 0, not 5, when the gate is inconclusive")
    g.add_argument("--junit", type=Path, metavar="FILE", help="write the gate as JUnit XML: each figure a test case")
    g.add_argument("--markdown", type=Path, metavar="FILE", help="write the gate as Markdown a pipeline can post")


async def handle(args: argparse.Namespace) -> int:
    if args.gate:
        return gate_runs(args)
    used = [flag for attr, flag in _GATE_ONLY if getattr(args, attr)]
    if used:
        raise UsageError(f"{', '.join(used)} only with --gate")
    return compare_runs(args.run_dirs, args.out or report.DEFAULT_COMPARE_FILE, args.json)


def compare_runs(run_dirs: list[Path], out: Path, as_json: bool) -> int:
    if len(run_dirs) < 2:
        raise UsageError("compare needs at least two run directories")
    runs = [report.load_run(d) for d in run_dirs]  # every run is read before anything is written
    written = report.write_compare(runs, out)
    if as_json:
        print(json.dumps({"runs": report.compare_rows(runs), "html": str(written)}, indent=2))
    else:
        print(report.compare_text(runs))
        print(f"wrote {written}")
    return EXIT_OK


def gate_runs(args: argparse.Namespace) -> int:
    """The gate's report printed (and written as --junit, --markdown, --out asked); its exit code."""
    if len(args.run_dirs) < 2:
        raise UsageError("--gate needs a baseline run and a candidate run (BASE... CANDIDATE); 1 was given")
    specs = [parse_gate(value) for value in args.gate]
    if args.gate_request is not None:
        check_request_gates(specs, args.gate_request)
    outputs = ci_outputs(args)  # checked writable before the runs are read
    latency = any(s.figure.latency for s in specs)
    *bases, candidate = (read_gate_run(d, request=args.gate_request, latency=latency) for d in args.run_dirs)
    gated = judge_runs(bases, candidate, specs, allow_plan_change=args.allow_plan_change)
    if args.out is not None:
        report.write_compare([report.load_run(d) for d in args.run_dirs], args.out)
    if outputs.junit is not None:
        report.write_file(outputs.junit, gate_junit(gated))
    if outputs.markdown is not None:
        report.write_file(outputs.markdown, gate_markdown(gated))
    if args.json:
        print(json.dumps(gate_json(gated), indent=2))
    else:
        print(gate_text(gated, inconclusive_ok=args.inconclusive_ok))
    code = gated.exit_code
    return EXIT_OK if code == EXIT_INCONCLUSIVE and args.inconclusive_ok else code


def gate_json(gated: GateReport) -> dict[str, object]:
    """The GateReport as JSON: its baseline runs (base_runs, and base_run: their ids joined),
    how many, and its exit code (before --inconclusive-ok)."""
    return {
        **dataclasses.asdict(gated),
        "base_run": gated.base_run,
        "baselines": gated.baselines,
        "exit_code": gated.exit_code,
    }
