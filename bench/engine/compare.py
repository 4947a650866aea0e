"""Two engine builds against each other: requests per generator CPU-second, per case and run.

Run:  .venv/bin/python -m bench.engine.compare --baseline OLD --candidate NEW

What a change costs (e.g. phase timings): the same nginx, pinning, connections and method as
bench.py, the two binaries back to back in every run (the order alternating), the ratio
candidate / baseline taken per run and its median reported. Results go to
bench/engine/results/<date>-compare.json.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
from pathlib import Path

from bench.engine.bench import (
    DEFAULT_RUNS,
    FILES_BYTES,
    MODES,
    THROUGHPUT_CONNECTIONS,
    engine_throughput,
    write_results,
)
from bench.engine.target import served_files

DEFAULT_DURATION_S = 5


def main() -> int:
    args = parse_args()
    cases = []
    with served_files("loadfleet-compare-", FILES_BYTES, fd_limit=THROUGHPUT_CONNECTIONS * 4) as (url, work):
        for file in FILES_BYTES:
            for mode, keep_alive in MODES.items():
                cases.append(compare(args, url, file, mode, keep_alive, work))
    print(f"\nmedian of {args.runs} runs of {args.duration_s} s, {THROUGHPUT_CONNECTIONS} connections")
    print(f"{'file':8} {'mode':11} {'baseline':>10} {'candidate':>10} {'ratio':>6}  per run")
    for c in cases:
        runs = ", ".join(f"{r:.3f}" for r in c["ratios"])
        print(f"{c['file']:8} {c['mode']:11} {c['baseline']:10,.0f} {c['candidate']:10,.0f} {c['ratio']:6.3f}  {runs}")
    write_results(
        {
            "runs": args.runs,
            "duration_s": args.duration_s,
            "baseline_sha256": sha256(args.baseline),
            "candidate_sha256": sha256(args.candidate),
            "cases": cases,
        },
        "-compare",
    )
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="loadfleet-engine binary to compare against")
    parser.add_argument("--candidate", type=Path, required=True, help="loadfleet-engine binary under test")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="runs per case (median taken)")
    parser.add_argument("--duration-s", type=int, default=DEFAULT_DURATION_S, help="seconds per run")
    args = parser.parse_args()
    problems = [
        p
        for p, bad in [
            ("--runs must be >= 1", args.runs < 1),
            ("--duration-s must be >= 1", args.duration_s < 1),
            (f"no engine at {args.baseline}", not args.baseline.is_file()),
            (f"no engine at {args.candidate}", not args.candidate.is_file()),
        ]
        if bad
    ]
    if problems:
        parser.error("; ".join(problems))
    return args


def compare(args: argparse.Namespace, url: str, file: str, mode: str, keep_alive: bool, work: Path) -> dict:
    def run(engine: Path) -> float:
        m = engine_throughput(engine, url, file, keep_alive, args.duration_s, work)
        if m.errors:
            raise RuntimeError(f"{engine}: {m.errors} errors in {file} {mode}")
        return m.requests_per_cpu_s

    pairs = []
    for n in range(args.runs):
        # Alternate who goes first, so a drift in machine load favours neither.
        if n % 2 == 0:
            b, c = run(args.baseline), run(args.candidate)
        else:
            c, b = run(args.candidate), run(args.baseline)
        pairs.append((b, c))
        print(
            f"{file} {mode} run {n + 1}: baseline {b:,.0f}, candidate {c:,.0f} req/CPU-s, ratio {c / b:.3f}", flush=True
        )
    return {
        "file": file,
        "mode": mode,
        "metric": "requests_per_cpu_s",
        "baseline": statistics.median(b for b, _ in pairs),
        "candidate": statistics.median(c for _, c in pairs),
        "ratio": statistics.median(c / b for b, c in pairs),
        "ratios": [c / b for b, c in pairs],
        "runs": [{"baseline": b, "candidate": c} for b, c in pairs],
    }


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


if __name__ == "__main__":
    sys.exit(main())
