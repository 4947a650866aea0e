"""The regression gate's evidence: real runs on a lab, each candidate judged by `loadfleet compare
--gate` against the most recent baseline runs before it, as a pipeline keeping main's last runs does.

Run:  .venv/bin/python -m bench.gate.aa_ab [--pairs 20] [--baselines 3] [--duration-s 30]
                                          [--work build/gate-aa-ab-baselines-N]

A lab of one nginx behind two real HAProxies on loopback: `base` holds every request
`--base-delay-ms` (a service of a few milliseconds, as an application's is) and `slow` holds it
`--slowdown-ms` longer (haproxy.py `delay_ms`, a Lua sleep). The servers run on one core, each run
(`loadfleet run --local 1`) on the other. Then:

The runs form one sequence of A runs (against `base`) and B runs (against `slow`): first
`--baselines` A runs, then `--pairs` A runs and `--pairs` B runs interleaved (A then B, then B
then A, alternating, so a drift of the machine does not always favour one arm). Each run after
the first ones is a candidate, gated against the `--baselines` most recent A runs before it
(an A candidate then becomes a baseline of the runs after it, as a merged change does):

- A/A: a candidate A run: the gate must pass (exit 0);
- A/B: a candidate B run: the gate must find the regression (exit 4).

With --baselines 1 it is the two-run gate of the first experiment (2026-11-28-aa-ab.json), but
on this sequence. The slowdown actually added is measured on the lab before the runs (a
sequential probe of both proxies) and kept with the results.

The experiment takes about (baselines + 2 × pairs) × (duration + ~8 s): 43 runs of 30 s ≈ 30 min.
Run it on an otherwise idle machine (no build beside it). It resumes: each finished run is kept
in `WORK/runs.jsonl` and each verdict in `WORK/pairs.jsonl`; run the same command again and it
goes on from the next run (WORK/settings.json refuses a resume with other settings). The
results (rates, each candidate's verdicts, changes, intervals and baselines, the measured
slowdown, the exact command) go to
bench/gate/results/<date>-aa-ab-baselines-<N>.json; a smoke's (a few short runs, e.g. `--pairs 1
--duration-s 22 --work build/gate-smoke --results build/gate-smoke`) go elsewhere, out of the
evidence.
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
# p90 within +15 %, not +10 % as in the first experiment (2026-11-28-aa-ab.json), chosen from that
# experiment before this one's runs: its A/A p90 changes spread with a standard deviation of 4.2 %,
# so one run strays by σ ≈ 3 %, and an honest interval against 3 baselines is ±1.96·σ·√(4/3) ≈ ±7 %:
# 19 of 20 unchanged runs pass only a tolerance above 3.6·σ·√(4/3) ≈ 12.5 % (docs/ci.md "Several
# baseline runs"). Mean and ok/s strayed by σ ≈ 2 % (8.4 % needed): +10 % stays. The slowdown
# (≈ +50 % on p90) is far beyond either.
GATES = ("p90_ms:+15%", "mean_ms:+10%", "ok_rps:-10%")
PROBE_REQUESTS = 300
RUN_TIMEOUT_EXTRA_S = 120  # a run's start-up, warm-up and summary beyond its duration
BASELINES = 3  # the A runs a candidate is gated against (docs/ci.md recommends 3 or more)


@dataclass(frozen=True)
class Slot:
    """One run of the sequence: its place, its arm ("A" against base, "B" against slow) and, for
    a candidate, what it tests ("A/A" or "A/B") and its index among them (-1: a first baseline)."""

    place: int
    arm: str
    kind: str = ""
    index: int = -1


@dataclass(frozen=True)
class Pair:
    kind: str  # "A/A" or "A/B"
    index: int
    base_runs: list[str]  # the baselines, oldest first
    candidate_run: str
    exit_code: int
    figures: list[dict]  # the gate's figures as `compare --json` gives them
    method: str = ""  # the gate's method, which says how many baselines it used

    @property
    def as_expected(self) -> bool:
        return self.exit_code == (0 if self.kind == "A/A" else 4)


def main() -> int:
    args = parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    plan = write_plan(work, args)
    slots = schedule(args.pairs, args.baselines)
    if args.dry_run:
        for slot in slots:
            against = [b.place for b in recent_a(slots, slot, args.baselines)]
            role = f"candidate {slot.kind} {slot.index}, gated against runs {against}" if slot.kind else "baseline"
            print(f"run {slot.place}: {slot.arm} ({role})")
        print(f"plan: {plan}\ngates: {' '.join(args.gate)}")
        return 0
    refused = settings_mismatch(work, args)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    runs, done = read_runs(work), read_pairs(work)
    with lab(work, args.base_delay_ms, args.slowdown_ms) as (base_url, slow_url):
        slowdown = probe_slowdown(base_url, slow_url)
        print(f"slowdown measured on the lab: +{slowdown['added_median_ms']:.2f} ms (median of {PROBE_REQUESTS})")
        urls = {"A": base_url, "B": slow_url}
        for slot in slots:
            if slot.place not in runs:
                runs[slot.place] = run_once(plan, work, urls[slot.arm], args.duration_s)
                with (work / "runs.jsonl").open("a") as f:
                    f.write(json.dumps({"place": slot.place, "arm": slot.arm, "run_dir": str(runs[slot.place])}) + "\n")
            if slot.kind and (slot.kind, slot.index) not in done:
                bases = [runs[b.place] for b in recent_a(slots, slot, args.baselines)]
                pair = gate_candidate(args, slot, bases, runs[slot.place])
                done[(slot.kind, slot.index)] = pair
                with (work / "pairs.jsonl").open("a") as f:
                    f.write(json.dumps(asdict(pair)) + "\n")
                verdict = "as expected" if pair.as_expected else "NOT as expected"
                print(f"{slot.kind} {slot.index} (against {len(bases)}): exit {pair.exit_code} ({verdict})")
    write_results(args, list(done.values()), slowdown)
    return 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--pairs", type=int, default=20, help="candidates of each kind, A/A and A/B (default 20)")
    p.add_argument(
        "--baselines",
        type=int,
        default=BASELINES,
        help=f"the most recent A runs each candidate is gated against (default {BASELINES})",
    )
    p.add_argument("--duration-s", type=int, default=30, help="each run's measured seconds (default 30)")
    p.add_argument("--clients", type=int, default=8, help="closed-model clients of each run (default 8)")
    p.add_argument("--base-delay-ms", type=int, default=3, help="the base proxy's hold per request (default 3)")
    p.add_argument("--slowdown-ms", type=int, default=2, help="what the slow proxy holds more (default 2)")
    p.add_argument(
        "--gate",
        action="append",
        help=f"a --gate of compare (repeatable; default {' '.join(GATES)})".replace("%", "%%"),
    )
    p.add_argument(
        "--work", type=Path, help="runs and the resume files (default build/gate-aa-ab-baselines-N, N baselines)"
    )
    p.add_argument(
        "--results", type=Path, default=RESULTS_DIR, help="where the results file goes (a smoke's: elsewhere)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the schedule and the plan; run nothing")
    args = p.parse_args()
    args.gate = args.gate or list(GATES)
    args.work = args.work or REPO / "build" / f"gate-aa-ab-baselines-{args.baselines}"
    if args.pairs < 1 or args.baselines < 1:
        p.error("--pairs and --baselines must be at least 1")
    return args


def schedule(pairs: int, baselines: int) -> list[Slot]:
    """`baselines` A runs, then the candidates: A/A and A/B interleaved, their order alternating."""
    slots = [Slot(place, "A") for place in range(baselines)]
    for index in range(pairs):
        kinds = ("A/A", "A/B") if index % 2 == 0 else ("A/B", "A/A")
        for kind in kinds:
            slots.append(Slot(len(slots), "A" if kind == "A/A" else "B", kind, index))
    return slots


def recent_a(slots: list[Slot], slot: Slot, baselines: int) -> list[Slot]:
    """The `baselines` most recent A runs before `slot`, oldest first."""
    return [s for s in slots[: slot.place] if s.arm == "A"][-baselines:]


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


def gate_candidate(args: argparse.Namespace, slot: Slot, bases: list[Path], candidate: Path) -> Pair:
    """`loadfleet compare BASE... CANDIDATE --gate ... --json` on the runs, as a pipeline calls it."""
    gates = [a for g in args.gate for a in ("--gate", g)]
    done = subprocess.run(
        [*loadfleet(), "compare", *map(str, bases), str(candidate), *gates, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode not in (0, 4, 5):
        raise SystemExit(f"compare failed (exit {done.returncode}): {done.stderr.strip()}")
    report = json.loads(done.stdout)
    return Pair(
        slot.kind,
        slot.index,
        [b.name for b in bases],
        candidate.name,
        done.returncode,
        report.get("figures", []),
        report.get("method", ""),
    )


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


def settings_mismatch(work: Path, args: argparse.Namespace) -> str:
    """Why the runs kept in WORK cannot be resumed with these arguments ("" when they can).

    A resumed sequence must be the same experiment: its runs and verdicts were made with the
    settings first recorded in WORK/settings.json. Only --pairs may grow (it appends slots)."""
    settings = {
        "baselines": args.baselines,
        "duration_s": args.duration_s,
        "clients": args.clients,
        "base_delay_ms": args.base_delay_ms,
        "slowdown_ms": args.slowdown_ms,
        "gates": args.gate,
    }
    path = work / "settings.json"
    if not path.exists():
        path.write_text(json.dumps(settings, indent=1) + "\n")
        return ""
    kept = json.loads(path.read_text())
    changed = [f"{key} {kept.get(key)} -> {value}" for key, value in settings.items() if kept.get(key) != value]
    if not changed:
        return ""
    return (
        f"{work} holds runs of another experiment ({'; '.join(changed)}): "
        "give a new --work to start this one, or the same arguments to resume that one"
    )


def read_runs(work: Path) -> dict[int, Path]:
    """The runs done so far, by their place in the sequence."""
    path = work / "runs.jsonl"
    if not path.exists():
        return {}
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {int(line["place"]): Path(line["run_dir"]) for line in lines}


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
        print(f"{kind}: {rate['as_expected']} of {rate['pairs']} candidates {goal}")
    args.results.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC)
    # The number of baselines is in the name: experiments on one day with different ones are kept apart.
    path = args.results.resolve() / f"{stamp:%Y-%m-%d}-aa-ab-baselines-{args.baselines}.json"
    fields = {
        "date": stamp.isoformat(timespec="seconds"),
        "command": shlex.join(["python", "-m", "bench.gate.aa_ab", *sys.argv[1:]]),
        "machine": {"nproc": os.cpu_count(), "kernel": os.uname().release},
        "gates": args.gate,
        "baselines": args.baselines,
        "duration_s": args.duration_s,
        "clients": args.clients,
        "base_delay_ms": args.base_delay_ms,
        "slowdown_ms": args.slowdown_ms,
        "slowdown_measured": slowdown,
        "rates": rates,
        "pairs": [asdict(p) for p in sorted(pairs, key=lambda p: (p.kind, p.index))],
    }
    path.write_text(json.dumps(fields, indent=1) + "\n")
    print(f"results: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    return path


if __name__ == "__main__":
    sys.exit(main())
