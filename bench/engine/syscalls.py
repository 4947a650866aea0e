"""System calls per request of the engine and of wrk, for every file and connection mode of
bench.py, counted by the kernel's syscall tracepoints (`perf stat -e 'syscalls:sys_enter_*'`).

Run:  .venv/bin/python -m bench.engine.syscalls [--duration-s 3]

Each generator runs once per case under the same nginx, pinning and connections as bench.py,
wrapped in perf stat (which counts the generator and its threads, not the server). Counting
tracepoints costs little, unlike strace, so the generators keep their usual pace and batching.
The counts include start-up (a few hundred calls), negligible over tens of thousands of
requests. Results go to bench/engine/results/<date>-syscalls.json.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from bench.engine.bench import (
    DEFAULT_ENGINE,
    FILES_BYTES,
    MODES,
    THROUGHPUT_CONNECTIONS,
    engine_throughput,
    write_results,
    wrk_throughput,
)
from bench.engine.target import served_files

DEFAULT_DURATION_S = 3
# Calls made less often than this per request are summed under "other".
SHOWN_PER_REQUEST = 0.01
TOTAL = "all system calls"


def main() -> int:
    args = parse_args()
    if shutil.which("perf") is None:
        sys.exit("perf is needed (apt-get install linux-perf)")
    cases = []
    with served_files("loadfleet-syscalls-", FILES_BYTES, fd_limit=THROUGHPUT_CONNECTIONS * 4) as (url, work):
        for file in FILES_BYTES:
            for mode, keep_alive in MODES.items():
                cases.append(
                    {
                        "file": file,
                        "mode": mode,
                        "engine": count(args, "engine", url, file, keep_alive, work),
                        "wrk": count(args, "wrk", url, file, keep_alive, work),
                    }
                )
                print_case(cases[-1])
    write_results(
        {
            "duration_s": args.duration_s,
            "cases": cases,
        },
        "-syscalls",
    )
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration-s", type=int, default=DEFAULT_DURATION_S, help="seconds per run")
    parser.add_argument("--engine", type=Path, default=DEFAULT_ENGINE, help="loadfleet-engine binary")
    args = parser.parse_args()
    if args.duration_s < 1 or not args.engine.is_file():
        parser.error("--duration-s must be >= 1 and --engine must exist")
    return args


def count(args: argparse.Namespace, generator: str, url: str, file: str, keep_alive: bool, work: Path) -> dict:
    """One run of `generator` under perf stat: requests, and calls per request by name."""
    out = work / "perf.csv"
    wrap = ["perf", "stat", "-x,", "-o", str(out), "-e", "raw_syscalls:sys_enter", "-e", "syscalls:sys_enter_*", "--"]
    m = (
        engine_throughput(args.engine, url, file, keep_alive, args.duration_s, work, wrap)
        if generator == "engine"
        else wrk_throughput(url, file, keep_alive, args.duration_s, wrap)
    )
    calls = parse_perf(out.read_text())
    per_request = {name: n / m.requests for name, n in calls.items()}
    shown = {
        k: round(v, 3)
        for k, v in sorted(per_request.items(), key=lambda kv: -kv[1])
        if v >= SHOWN_PER_REQUEST and k != TOTAL
    }
    other = per_request.get(TOTAL, 0.0) - sum(
        v for k, v in per_request.items() if k != TOTAL and v >= SHOWN_PER_REQUEST
    )
    return {
        "requests": m.requests,
        "errors": m.errors,
        "total_per_request": round(per_request.get(TOTAL, 0.0), 3),
        "per_request": shown,
        "other_per_request": round(max(other, 0.0), 3),
    }


def parse_perf(csv: str) -> dict[str, int]:
    """perf stat -x, lines: count,unit,event,... -> {syscall name: count} (and TOTAL)."""
    calls = {}
    for line in csv.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or not fields[0].strip().isdigit():
            continue
        event, n = fields[2], int(fields[0])
        if event == "raw_syscalls:sys_enter":
            calls[TOTAL] = n
        elif n:
            calls[event.removeprefix("syscalls:sys_enter_")] = n
    if TOTAL not in calls:
        raise RuntimeError(f"perf stat counted no system calls: {csv[:500]}")
    return calls


def print_case(case: dict) -> None:
    print(f"\n{case['file']} {case['mode']}")
    for generator in ("engine", "wrk"):
        c = case[generator]
        calls = ", ".join(f"{name} {n:g}" for name, n in c["per_request"].items())
        print(
            f"  {generator:6} {c['total_per_request']:6.2f} calls/request ({calls}, other {c['other_per_request']:g};"
            f" {c['requests']} requests, {c['errors']} errors)"
        )


if __name__ == "__main__":
    sys.exit(main())
