"""What mutual TLS costs the controller: the same simulated fleet connects to a controller
serving plaintext and to one requiring client certificates, then idles (a heartbeat and a
lease renewal per agent per second: the traffic every session carries all the time),
alternately for several rounds on the same cores.

Run:  .venv/bin/python -m bench.fleet.tls_cost --agents 300 --idle-s 20 --rounds 3

Measured from /proc (controller user + system CPU): CPU seconds from the fleet's first
connection to every session welcomed (TLS handshakes and certificate checks included), and
CPU per second of idle, in % of a core. Each mode's figures are listed per round with their
median, since this machine is shared and a round can be disturbed. The load itself (interval
reports) is measured by bench.py with and without --tls.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.fleet.bench import (
    CONTROLLER_CORE,
    CONTROLLER_START_S,
    DEFAULT_CONTROLLER_CMD,
    RESULTS_DIR,
    SIM,
    SIM_CORES,
    free_port,
    machine,
    wait_for_port,
)
from bench.fleet.fleetsim import tls
from bench.fleet.fleetsim.children import Children
from bench.fleet.fleetsim.procstat import cpu_s
from bench.limits import raise_fd_limit

MODES = ("plaintext", "mutual TLS")
READY_TIMEOUT_S = 120.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=300)
    parser.add_argument("--idle-s", type=float, default=20.0, help="idle seconds measured per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (plaintext, TLS)")
    parser.add_argument("--controller-cmd", default=DEFAULT_CONTROLLER_CMD)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.agents < 1 or args.idle_s <= 0 or args.rounds < 1:
        parser.error("--agents, --idle-s and --rounds must be positive")
    return args


def one_round(args, mode: str, work: Path, pki: Path) -> dict:
    children = Children(work)
    try:
        port = free_port()
        address = f"127.0.0.1:{port}"
        secure = mode != "plaintext"
        controller = children.start(
            "controller",
            [
                "taskset",
                "-c",
                CONTROLLER_CORE,
                *shlex.split(args.controller_cmd),
                "--listen",
                address,
                "--runs-dir",
                str(work / "runs"),
                *(tls.controller_args(pki) if secure else []),
            ],
        )
        wait_for_port(port, CONTROLLER_START_S, controller, children)
        time.sleep(1.0)  # let start-up work settle
        before = cpu_s(controller.pid)
        children.start(
            "sim",
            [
                "taskset",
                "-c",
                SIM_CORES,
                sys.executable,
                *SIM,
                "--controller",
                address,
                "--agents",
                str(args.agents),
                "--id-prefix",
                "sim0-",
                "--max-s",
                str(args.idle_s + 300),
                "--results",
                str(work / "sim.json"),
                *(["--tls-dir", str(pki)] if secure else []),
            ],
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while f"ready {args.agents}" not in children.log_path("sim").read_text(errors="replace"):
            if time.monotonic() > deadline or children.started["sim"].poll() is not None:
                raise RuntimeError(
                    f"the fleet did not connect ({mode}):\n{children.log_tail('sim')}\n"
                    f"{children.log_tail('controller')}"
                )
            time.sleep(0.05)
        connected = cpu_s(controller.pid)
        time.sleep(args.idle_s)
        idle = cpu_s(controller.pid) - connected
        children.stop("sim", grace_s=30)
        sessions = json.loads((work / "sim.json").read_text())["counters"]
        return {
            "mode": mode,
            "connect_cpu_s": round(connected - before, 3),
            "idle_cpu_pct": round(100 * idle / args.idle_s, 2),
            "sessions_welcomed": sessions.get("sessions_welcomed", 0),
            "sessions_failed": sessions.get("sessions_failed", 0),
        }
    finally:
        children.stop_all()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    raise_fd_limit(4 * args.agents + 1024)
    os.sched_setaffinity(0, {int(c) for c in SIM_CORES.split(",")})
    work = Path(tempfile.mkdtemp(prefix="loadfleet-tls-cost-"))
    pki = work / "pki"
    tls.make_pki(pki, [f"sim0-{i:05d}" for i in range(args.agents)])
    rounds = []
    for k in range(args.rounds):
        for mode in MODES if k % 2 == 0 else MODES[::-1]:  # alternate which goes first
            round_dir = work / f"{k}-{'tls' if mode != 'plaintext' else 'plain'}"
            round_dir.mkdir()
            rounds.append(one_round(args, mode, round_dir, pki))
            print(json.dumps(rounds[-1]), flush=True)
    summary = {
        mode: {
            key: statistics.median(r[key] for r in rounds if r["mode"] == mode)
            for key in ("connect_cpu_s", "idle_cpu_pct")
        }
        for mode in MODES
    }
    result = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": shlex.join(["python", "-m", "bench.fleet.tls_cost", *(sys.argv[1:] if argv is None else argv)]),
        "machine": machine(),
        "agents": args.agents,
        "idle_s": args.idle_s,
        "rounds": rounds,
        "median": summary,
    }
    out = args.out or RESULTS_DIR / f"{time.strftime('%Y-%m-%d')}-tls-cost-{args.agents}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print("| controller | agents | CPU to connect the fleet (median, s) | idle CPU, % of a core (median) | rounds |")
    print("|---|---|---|---|---|")
    for mode in MODES:
        per_round = ", ".join(
            f"{r['connect_cpu_s']:.2f} s / {r['idle_cpu_pct']:.1f} %" for r in rounds if r["mode"] == mode
        )
        print(
            f"| {mode} | {args.agents} | {summary[mode]['connect_cpu_s']:.2f} | {summary[mode]['idle_cpu_pct']:.1f} "
            f"| {per_round} |"
        )
    print(f"\nresults: {out}")
    return 0 if all(r["sessions_welcomed"] == args.agents for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
