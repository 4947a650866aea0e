"""User-space instructions per request of engine builds, counted by valgrind (callgrind).

Run:  .venv/bin/python -m bench.engine.instructions ENGINE [ENGINE ...]

CPU time on a shared machine swings by ±10 % from run to run, too much to price a change of
1 or 2 %. Instructions executed in user space do not depend on what else runs: each engine
runs under callgrind against the bench's nginx, keep-alive and connection per request, for
two request budgets, and the difference of instructions over the difference of requests is
the cost of one request (start-up cancels out). Two figures: all of the engine's instructions,
which include work per wakeup and per interval that the engine, slowed down ~50 times, spreads
over far fewer requests than at full speed; and those under `Connections::request` (sending
one request and recording it, phases included), which are per request only. The kernel's work
is not counted: compare system calls per request with syscalls.py. Results go to
bench/engine/results/<date>-instructions.json.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bench.engine.bench import THROUGHPUT_CONNECTIONS, write_results
from bench.engine.generators import run_engine
from bench.engine.target import served_files

FILE = "1k.bin"
MODES = {"keep-alive": True, "close": False}
BUDGETS = (5_000, 20_000)
# Under callgrind the engine runs ~50x slower: time enough for the budgets.
LIMIT_S = 120


def main() -> int:
    args = parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed (apt-get install valgrind)")
    rows = []
    with served_files("loadfleet-instructions-", {FILE: 1024}, fd_limit=THROUGHPUT_CONNECTIONS * 4) as (url, work):
        for engine in args.engines:
            for mode, keep_alive in MODES.items():
                points = [count(engine, url, keep_alive, budget, work) for budget in BUDGETS]
                (r1, i1, q1), (r2, i2, q2) = points
                per_request, in_request = (i2 - i1) / (r2 - r1), (q2 - q1) / (r2 - r1)
                rows.append(
                    {
                        "engine": str(engine),
                        "sha256": hashlib.sha256(engine.read_bytes()).hexdigest(),
                        "mode": mode,
                        "points": [{"requests": r, "instructions": i, "in_request": q} for r, i, q in points],
                        "instructions_per_request": round(per_request),
                        "in_request_per_request": round(in_request),
                    }
                )
                print(
                    f"{engine} {mode}: {per_request:,.0f} instructions per request, {in_request:,.0f} of them "
                    f"under Connections::request ({r1} and {r2} requests)",
                    flush=True,
                )
    write_results(
        {
            "file": FILE,
            "connections": THROUGHPUT_CONNECTIONS,
            "rows": rows,
        },
        "-instructions",
    )
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("engines", type=Path, nargs="+", help="loadfleet-engine binaries")
    args = parser.parse_args()
    missing = [str(e) for e in args.engines if not e.is_file()]
    if missing:
        parser.error(f"no engine at {', '.join(missing)}")
    return args


def count(engine: Path, url: str, keep_alive: bool, budget: int, work: Path) -> tuple[int, int, int]:
    """(requests, user-space instructions, those under Connections::request) of one run."""
    out = work / "callgrind.out"
    # taskset (put before the engine by run_engine) execs the engine: follow it, and keep the
    # last output written, the engine's.
    wrap = [
        "valgrind",
        "--tool=callgrind",
        "--trace-children=yes",
        f"--callgrind-out-file={out}",
        "--log-file=" + str(work / "valgrind.log"),
    ]
    m = run_engine(
        engine,
        url,
        f"/{FILE}",
        clients=THROUGHPUT_CONNECTIONS,
        keep_alive=keep_alive,
        duration_s=LIMIT_S,
        log=work / "engine.log",
        wrap=wrap,
        max_requests=budget,
    )
    if m.requests != budget:
        raise RuntimeError(f"{engine}: {m.requests} requests, not the budget of {budget}")
    if m.errors:
        raise RuntimeError(f"{engine}: {m.errors} errors under callgrind")
    totals = re.search(r"^totals:\s+(\d+)", out.read_text(), re.M) or re.search(
        r"^summary:\s+(\d+)", out.read_text(), re.M
    )
    if not totals:
        raise RuntimeError(f"no instruction total in {out}")
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", str(out)], capture_output=True, text=True, check=True
    ).stdout
    request = re.search(r"^\s*([\d,]+) \([^)]*\)\s+\S*Connections::request::\{\{closure\}\}", annotated, re.M)
    if not request:
        raise RuntimeError(f"no Connections::request in callgrind_annotate {out}")
    return m.requests, int(totals.group(1)), int(request.group(1).replace(",", ""))


if __name__ == "__main__":
    sys.exit(main())
