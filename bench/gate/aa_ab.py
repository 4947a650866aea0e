"""The regression gate's evidence: pairs of real runs on a lab, judged by `loadfleet compare --gate`.

Run:  .venv/bin/python -m bench.gate.aa_ab [--pairs 20] [--duration-s 30] [--work build/gate-aa-ab]

A lab of one nginx behind two real HAProxies on loopback: `base` holds every request
`--base-delay-ms` (a service of a few milliseconds, as an application's is) and `slow` holds it
`--slowdown-ms` longer (haproxy.py `delay_ms`, a Lua sleep). The servers run on one core, each run
(`loadfleet run --local 1`) on the other. Then:

- A/A: `--pairs` pairs of runs of the same plan against `base`: the gate must pass (exit 0);
- A/B: `--pairs` pairs, the baseline against `base`, the candidate against `slow`: the gate must
  find the regression (exit 4).

The order of a pair alternates (the candidate first in every other pair), so a drift of the
machine over the hour does not always favour one side. The slowdown actually added is measured
on the lab before the runs (a sequential probe of both proxies) and kept with the results.

The experiment takes about (2 × pairs × 2) × (duration + ~8 s): 80 runs of 30 s ≈ 50 min. Run it
on an otherwise idle machine (no build beside it). It resumes: each finished pair is kept in
`WORK/pairs.jsonl`; run the same command again and it goes on from the next pair. The results
(rates, each pair's verdicts, changes and intervals, the measured slowdown, the exact command)
go to bench/gate/results/<date>-aa-ab.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import http.client
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
HOST = "127.0.0.71"
SERVER_CORE, RUN_CORE = 1, 0
# Chosen before the experiment's runs: p90 and not p99, because a 30 s run's slowest percent is a
# few hundred responses whose p99 moves by ±15-50 % between resamples of the same run (docs/ci.md);
# a smoke pair on a busy machine gave p99 CIs 40 points wide. A p99 gate is the longer run's.
GATES = ("p90_ms:+10%", "mean_ms:+10%", "ok_rps:-10%")
PROBE_REQUESTS = 300
RUN_TIMEOUT_EXTRA_S = 120  # a run's start-up, warm-up and summary beyond its duration


@dataclass(frozen=True)
class Pair:
    kind: str  # "A/A" or "A/B"
    index: int
    base_run: str
    candidate_run: str
    exit_code: int
    figures: list[dict]  # the gate's figures as `compare --json` gives them

    @property
    def as_expected(self) -> bool:
        return self.exit_code == (0 if self.kind == "A/A" else 4)


def main() -> int:
    args = parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    plan = write_plan(work, args)
    if args.dry_run:
        for kind, index, first_is_base in schedule(args.pairs):
            print(f"{kind} pair {index}: {'base then candidate' if first_is_base else 'candidate then base'}")
        print(f"plan: {plan}\ngates: {' '.join(args.gate)}")
        return 0
    done = read_pairs(work)
    with lab(work, args.base_delay_ms, args.slowdown_ms) as (base_url, slow_url):
        slowdown = probe_slowdown(base_url, slow_url)
        print(f"slowdown measured on the lab: +{slowdown['added_median_ms']:.2f} ms (median of {PROBE_REQUESTS})")
        for kind, index, first_is_base in schedule(args.pairs):
            if (kind, index) in done:
                continue
            pair = run_pair(args, plan, work, kind, index, first_is_base, base_url, slow_url)
            done[(kind, index)] = pair
            with (work / "pairs.jsonl").open("a") as f:
                f.write(json.dumps(asdict(pair)) + "\n")
            verdict = "as expected" if pair.as_expected else "NOT as expected"
            print(f"{kind} pair {index}: exit {pair.exit_code} ({verdict})")
    write_results(args, list(done.values()), slowdown)
    return 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--pairs", type=int, default=20, help="pairs of each kind, A/A and A/B (default 20)")
    p.add_argument("--duration-s", type=int, default=30, help="each run's measured seconds (default 30)")
    p.add_argument("--clients", type=int, default=8, help="closed-model clients of each run (default 8)")
    p.add_argument("--base-delay-ms", type=int, default=3, help="the base proxy's hold per request (default 3)")
    p.add_argument("--slowdown-ms", type=int, default=2, help="what the slow proxy holds more (default 2)")
    p.add_argument(
        "--gate",
        action="append",
        help=f"a --gate of compare (repeatable; default {' '.join(GATES)})".replace("%", "%%"),
    )
    p.add_argument("--work", type=Path, default=REPO / "build" / "gate-aa-ab", help="runs and the resume file")
    p.add_argument("--dry-run", action="store_true", help="print the schedule and the plan; run nothing")
    args = p.parse_args()
    args.gate = args.gate or list(GATES)
    return args


def schedule(pairs: int) -> Iterator[tuple[str, int, bool]]:
    """(kind, index, whether the baseline runs first): A/A and A/B interleaved, order alternating."""
    for index in range(pairs):
        for kind in ("A/A", "A/B"):
            yield kind, index, index % 2 == 0


def write_plan(work: Path, args: argparse.Namespace) -> Path:
    plan = work / "gate.yaml"
    plan.write_text(
        "# The regression gate's experiment (bench/gate/aa_ab.py): written by it, one target `app`\n"
        "# whose url each run sets with --target.\n"
        "name: gate-aa-ab\n"
        f"duration_s: {args.duration_s + 3}\n"
        "warmup_s: 3\n"
        "targets:\n"
        f"  - {{name: app, url: 'http://{HOST}:1'}}\n"
        "workload:\n"
        "  keep_alive: true\n"
        "  requests: [{name: page, path: /index.html}]\n"
        f"load: {{model: closed, clients: {args.clients}}}\n"
        "agents: {wait_s: 20}\n"
    )
    return plan


@contextlib.contextmanager
def lab(work: Path, base_delay_ms: int, slowdown_ms: int) -> Iterator[tuple[str, str]]:
    """nginx and the two proxies, on SERVER_CORE; stopped by PID however the block ends."""
    from loadfleet.targets.daemon import Upstream
    from loadfleet.targets.haproxy import HaproxyServer
    from loadfleet.targets.nginx import NginxServer

    state = work / "lab"
    shutil.rmtree(state, ignore_errors=True)
    docroot = state / "docroot"
    docroot.mkdir(parents=True)
    (docroot / "index.html").write_text("loadfleet gate experiment\n" * 40)
    web = NginxServer(HOST, free_port(HOST), docroot, state, "web")
    upstream = [Upstream("web", web.host, web.port)]
    base = HaproxyServer(HOST, free_port(HOST), state, "base", upstream, delay_ms=base_delay_ms)
    slow = HaproxyServer(HOST, free_port(HOST), state, "slow", upstream, delay_ms=base_delay_ms + slowdown_ms)
    servers = [web, base, slow]
    try:
        for server in servers:
            server.start()
            for pid in server.pids:
                pin(pid, SERVER_CORE)
        yield base.url, slow.url
    finally:
        for server in reversed(servers):
            server.stop()


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def pin(pid: int, core: int) -> None:
    if (os.cpu_count() or 1) > core:
        subprocess.run(["taskset", "-a", "-cp", str(core), str(pid)], check=True, stdout=subprocess.DEVNULL)


def probe_slowdown(base_url: str, slow_url: str) -> dict:
    """The slowdown as the lab adds it: medians of sequential keep-alive requests to each proxy."""
    medians = {name: statistics.median(latencies_ms(url)) for name, url in (("base", base_url), ("slow", slow_url))}
    return {
        "base_median_ms": medians["base"],
        "slow_median_ms": medians["slow"],
        "added_median_ms": medians["slow"] - medians["base"],
        "requests": PROBE_REQUESTS,
    }


def latencies_ms(url: str) -> list[float]:
    host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    out = []
    try:
        for _ in range(PROBE_REQUESTS):
            start = time.perf_counter()
            conn.request("GET", "/index.html")
            conn.getresponse().read()
            out.append((time.perf_counter() - start) * 1000)
    finally:
        conn.close()
    return out


def run_pair(
    args: argparse.Namespace,
    plan: Path,
    work: Path,
    kind: str,
    index: int,
    first_is_base: bool,
    base_url: str,
    slow_url: str,
) -> Pair:
    roles = {"base": base_url, "candidate": base_url if kind == "A/A" else slow_url}
    order = ["base", "candidate"] if first_is_base else ["candidate", "base"]
    runs = {role: run_once(plan, work, roles[role], args.duration_s) for role in order}
    gates = [a for g in args.gate for a in ("--gate", g)]
    done = subprocess.run(
        [*loadfleet(), "compare", str(runs["base"]), str(runs["candidate"]), *gates, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode not in (0, 4, 5):
        raise SystemExit(f"compare failed (exit {done.returncode}): {done.stderr.strip()}")
    report = json.loads(done.stdout)
    return Pair(kind, index, runs["base"].name, runs["candidate"].name, done.returncode, report.get("figures", []))


def run_once(plan: Path, work: Path, url: str, duration_s: int) -> Path:
    """One run of the plan against `url` on RUN_CORE; its run directory."""
    argv = ["taskset", "-c", str(RUN_CORE), *loadfleet(), "run", str(plan), "--local", "1"]
    argv += ["--runs-dir", str(work / "runs"), "--target", f"app={url}", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=duration_s + RUN_TIMEOUT_EXTRA_S)
    if done.returncode not in (0, 4):
        raise SystemExit(f"run failed (exit {done.returncode}): {shlex.join(argv)}\n{done.stderr[-2000:]}")
    return Path(json.loads(done.stdout)["run_dir"])


def loadfleet() -> list[str]:
    """The CLI of this checkout's virtualenv (the one running this bench)."""
    return [str(Path(sys.executable).with_name("loadfleet"))]


def read_pairs(work: Path) -> dict[tuple[str, int], Pair]:
    path = work / "pairs.jsonl"
    if not path.exists():
        return {}
    pairs = [Pair(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    return {(p.kind, p.index): p for p in pairs}


def write_results(args: argparse.Namespace, pairs: list[Pair], slowdown: dict) -> Path:
    rates = {
        kind: {"pairs": len(of), "as_expected": sum(p.as_expected for p in of)}
        for kind in ("A/A", "A/B")
        if (of := [p for p in pairs if p.kind == kind])
    }
    for kind, rate in rates.items():
        goal = "pass (exit 0)" if kind == "A/A" else "caught (exit 4)"
        print(f"{kind}: {rate['as_expected']} of {rate['pairs']} pairs {goal}")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC)
    path = RESULTS_DIR / f"{stamp:%Y-%m-%d}-aa-ab.json"
    fields = {
        "date": stamp.isoformat(timespec="seconds"),
        "command": shlex.join(["python", "-m", "bench.gate.aa_ab", *sys.argv[1:]]),
        "machine": {"nproc": os.cpu_count(), "kernel": os.uname().release},
        "gates": args.gate,
        "duration_s": args.duration_s,
        "clients": args.clients,
        "base_delay_ms": args.base_delay_ms,
        "slowdown_ms": args.slowdown_ms,
        "slowdown_measured": slowdown,
        "rates": rates,
        "pairs": [asdict(p) for p in sorted(pairs, key=lambda p: (p.kind, p.index))],
    }
    path.write_text(json.dumps(fields, indent=1) + "\n")
    print(f"results: {path.relative_to(REPO)}")
    return path


if __name__ == "__main__":
    sys.exit(main())
