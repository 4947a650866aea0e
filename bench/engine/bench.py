"""Engine vs wrk: requests per generator CPU-second, p50 latency, memory at 10k connections.

Run:  .venv/bin/python -m bench.engine.bench [--quick]

Both generators load the same nginx (1 worker, core 0) from core 1; each is charged the
user + system CPU time the kernel accounted to it, so other load on the machine changes
wall-clock throughput but hardly the cost per request. Every figure is the median of
--runs runs, engine and wrk alternating within each run; ratios are engine / wrk per run.
Results go to bench/engine/results/<date>.json; docs/benchmarks.md reads them.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from bench.engine.generators import Arrivals, Measurement, run_engine, run_wrk
from bench.engine.target import served_files

REPO = Path(__file__).resolve().parents[2]
DEFAULT_ENGINE = REPO / ".venv" / "bin" / "loadfleet-engine"
RESULTS_DIR = Path(__file__).resolve().parent / "results"

FILES_BYTES = {"1k.bin": 1024, "30k.bin": 30 * 1024}
MODES = {"keep-alive": True, "close": False}
THROUGHPUT_CONNECTIONS = 50
LATENCY_CONNECTIONS = 10
MEMORY_CONNECTIONS = 10_000
MEMORY_LIMIT_MB = 200
# The same memory bound with users instead of clients: 2,000 arriving a second, each holding its
# kept-alive connection through 10 s of thought, are 10,000 in progress after 5 s.
ARRIVALS = Arrivals(rate_per_s=2000, think_ms=10_000, max_users=MEMORY_CONNECTIONS)
DEFAULT_RUNS = 3
DEFAULT_DURATION_S = 5
QUICK_DURATION_S = 2


def main() -> int:
    args = parse_args()
    with served_files("loadfleet-bench-", FILES_BYTES, fd_limit=MEMORY_CONNECTIONS * 2) as (url, work):
        results = {
            "engine_sha256": hashlib.sha256(args.engine.read_bytes()).hexdigest(),
            "runs": args.runs,
            "duration_s": args.duration_s,
            "throughput": throughput(args, url, work),
            "latency": latency(args, url, work),
            "memory": memory(args, url, work),
            "memory_arrivals": memory(args, url, work, ARRIVALS),
        }
    print_tables(results)
    write_results(results, "-quick" if args.quick else "")
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"1 run of {QUICK_DURATION_S} s per case")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="runs per case (median taken)")
    parser.add_argument("--duration-s", type=int, default=DEFAULT_DURATION_S, help="seconds per run")
    parser.add_argument("--engine", type=Path, default=DEFAULT_ENGINE, help="loadfleet-engine binary")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.duration_s = 1, QUICK_DURATION_S
    problems = [
        p
        for p, bad in [
            ("--runs must be >= 1", args.runs < 1),
            ("--duration-s must be >= 1", args.duration_s < 1),
            (f"no engine at {args.engine}", not args.engine.is_file()),
        ]
        if bad
    ]
    if problems:
        parser.error("; ".join(problems))
    return args


def throughput(args: argparse.Namespace, url: str, work: Path) -> list[dict]:
    """Requests per generator CPU-second for every file size and connection mode."""
    cases = []
    for file in FILES_BYTES:
        for mode, keep_alive in MODES.items():
            pairs = []
            for run in range(args.runs):

                def engine(file: str = file, keep_alive: bool = keep_alive) -> Measurement:
                    return engine_throughput(args.engine, url, file, keep_alive, args.duration_s, work)

                def wrk(file: str = file, keep_alive: bool = keep_alive) -> Measurement:
                    return wrk_throughput(url, file, keep_alive, args.duration_s)

                # Alternate who goes first, so a drift in machine load favours neither.
                e, w = (engine(), wrk()) if run % 2 == 0 else reversed((wrk(), engine()))
                pairs.append((e, w))
                progress(f"{file} {mode} run {run + 1}", e, w)
            cases.append(summarise(pairs, file=file, mode=mode, metric="requests_per_cpu_s"))
    return cases


def engine_throughput(
    engine: Path, url: str, file: str, keep_alive: bool, duration_s: int, work: Path, wrap: Sequence[str] = ()
) -> Measurement:
    """One throughput run of `engine` on `file`: THROUGHPUT_CONNECTIONS clients for `duration_s`
    (`wrap` before the command, e.g. perf stat)."""
    return run_engine(
        engine,
        url,
        f"/{file}",
        clients=THROUGHPUT_CONNECTIONS,
        keep_alive=keep_alive,
        duration_s=duration_s,
        log=work / "engine.log",
        wrap=wrap,
    )


def wrk_throughput(url: str, file: str, keep_alive: bool, duration_s: int, wrap: Sequence[str] = ()) -> Measurement:
    """The same run with wrk."""
    return run_wrk(
        f"{url}/{file}", connections=THROUGHPUT_CONNECTIONS, keep_alive=keep_alive, duration_s=duration_s, wrap=wrap
    )


def latency(args: argparse.Namespace, url: str, work: Path) -> dict:
    """p50 with few connections, where the generator's own time per request shows."""
    file, pairs = "1k.bin", []
    for run in range(args.runs):

        def engine() -> Measurement:
            return run_engine(
                args.engine,
                url,
                f"/{file}",
                clients=LATENCY_CONNECTIONS,
                keep_alive=True,
                duration_s=args.duration_s,
                log=work / "engine.log",
            )

        def wrk() -> Measurement:
            return run_wrk(
                f"{url}/{file}", connections=LATENCY_CONNECTIONS, keep_alive=True, duration_s=args.duration_s
            )

        # Alternated as in throughput(): the engine always went first before.
        e, w = (engine(), wrk()) if run % 2 == 0 else reversed((wrk(), engine()))
        pairs.append((e, w))
        progress(f"latency run {run + 1}", e, w)
    return summarise(pairs, file=file, mode=f"keep-alive, {LATENCY_CONNECTIONS} connections", metric="p50_us")


def memory(args: argparse.Namespace, url: str, work: Path, arrivals: Arrivals | None = None) -> dict:
    """The engine's resident memory while MEMORY_CONNECTIONS keep-alive connections are open:
    of as many closed clients, or (`arrivals`) of users in progress."""
    samples: list[dict] = []

    def sample(pid: int, report) -> None:
        status = read_proc_status(pid)
        samples.append(
            {
                "active_connections": sum(s.active_connections for s in report.stats),
                "users": sum(s.users for s in report.stats),
                "requests": sum(s.requests for s in report.stats),
                "vm_rss_kb": status.get("VmRSS"),
                "vm_hwm_kb": status.get("VmHWM"),
            }
        )

    duration_s = max(args.duration_s, 6) + (3 if arrivals else 0)  # 5 s of arrivals to fill up
    m = run_engine(
        args.engine,
        url,
        "/1k.bin",
        clients=MEMORY_CONNECTIONS,
        keep_alive=True,
        duration_s=duration_s,
        connect_timeout_ms=10_000,
        watch=sample,
        log=work / "engine.log",
        arrivals=arrivals,
    )
    full = [s for s in samples if s["active_connections"] == MEMORY_CONNECTIONS and s["vm_rss_kb"]]
    hwm_kb = max((s["vm_hwm_kb"] or 0 for s in samples), default=0)
    peak_rss_full_mb = max((s["vm_rss_kb"] for s in full), default=0) / 1024
    print(
        f"memory{' (arriving users)' if arrivals else ''}: {len(full)}/{len(samples)} intervals with all "
        f"{MEMORY_CONNECTIONS} connections open, "
        f"VmRSS {peak_rss_full_mb:.1f} MB, VmHWM {hwm_kb / 1024:.1f} MB, {m.requests} requests, {m.errors} errors",
        flush=True,
    )
    return {
        "connections": MEMORY_CONNECTIONS,
        "intervals_all_open": len(full),
        "samples": samples,
        "vm_rss_mb_all_open": round(peak_rss_full_mb, 1),
        "vm_hwm_mb": round(hwm_kb / 1024, 1),
        "limit_mb": MEMORY_LIMIT_MB,
        "within_limit": bool(full) and hwm_kb / 1024 <= MEMORY_LIMIT_MB,
        "requests": m.requests,
        "errors": m.errors,
    }


def summarise(pairs: list[tuple[Measurement, Measurement]], *, file: str, mode: str, metric: str) -> dict:
    def value(m: Measurement) -> float:
        return getattr(m, metric) or 0.0

    return {
        "file": file,
        "mode": mode,
        "metric": metric,
        "engine": statistics.median(value(e) for e, _ in pairs),
        "wrk": statistics.median(value(w) for _, w in pairs),
        "ratio": statistics.median(value(e) / value(w) if value(w) else 0.0 for e, w in pairs),
        "runs": [{"engine": record(e), "wrk": record(w)} for e, w in pairs],
    }


def record(m: Measurement) -> dict:
    return {
        **asdict(m),
        "requests_per_cpu_s": round(m.requests_per_cpu_s, 1),
        "requests_per_sleep": round(m.requests / m.sleeps, 2) if m.sleeps else None,
    }


def progress(label: str, e: Measurement, w: Measurement) -> None:
    def show(m: Measurement) -> str:
        p50 = f"{m.p50_us:.0f}" if m.p50_us is not None else "-"
        return (
            f"{m.generator} {m.requests} req / {m.cpu_s:.2f} CPU-s (sys {m.sys_s / m.cpu_s:.0%},"
            f" {m.requests / max(m.sleeps, 1):.1f} req/sleep)"
            f" = {m.requests_per_cpu_s:,.0f}"
            f" (p50 {p50} us, {m.errors} err)"
        )

    print(f"{label}: {show(e)} | {show(w)}", flush=True)


def print_tables(results: dict) -> None:
    print(
        f"\nmedian of {results['runs']} run(s) of {results['duration_s']} s, "
        f"{THROUGHPUT_CONNECTIONS} connections, generator on one core"
    )
    print(f"{'file':8} {'mode':11} {'engine req/CPU-s':>17} {'wrk req/CPU-s':>14} {'engine/wrk':>11}")
    for c in results["throughput"]:
        print(f"{c['file']:8} {c['mode']:11} {c['engine']:17,.0f} {c['wrk']:14,.0f} {c['ratio']:11.2f}")
    lat = results["latency"]
    print(
        f"\np50 ({lat['mode']}, {lat['file']}): engine {lat['engine']:.0f} us, wrk {lat['wrk']:.0f} us, "
        f"engine/wrk {lat['ratio']:.2f}"
    )
    for key, whose in (("memory", "clients"), ("memory_arrivals", "arriving users")):
        mem = results[key]
        print(
            f"memory at {mem['connections']} connections of {whose}: VmHWM {mem['vm_hwm_mb']} MB "
            f"(limit {mem['limit_mb']} MB: {'ok' if mem['within_limit'] else 'EXCEEDED or not reached'})"
        )


def machine() -> dict:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    wrk_version = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    return {"nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(), "wrk": wrk_version.strip()}


def read_proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM, ... of /proc/<pid>/status, in kB; empty if the process is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in lines) if v.strip().endswith("kB")}


def write_results(fields: dict, suffix: str = "") -> Path:
    """Writes a bench's results to results/<date><suffix>.json (see new_results_path), headed
    by the time, the exact command (`python -m` the running bench's module, and its arguments)
    and the machine, and says where."""
    main = sys.modules["__main__"].__spec__
    module = main.name if main is not None else Path(sys.argv[0]).stem
    results = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": shlex.join(["python", "-m", module, *sys.argv[1:]]),
        "machine": machine(),
        **fields,
    }
    path = new_results_path(suffix)
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"\nresults: {path.relative_to(REPO)}")
    return path


def new_results_path(suffix: str) -> Path:
    """results/<date><suffix>.json, or <date><suffix>-2.json ...: an earlier run of the day stays."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    path, n = RESULTS_DIR / f"{stamp}{suffix}.json", 2
    while path.exists():
        path, n = RESULTS_DIR / f"{stamp}{suffix}-{n}.json", n + 1
    return path


if __name__ == "__main__":
    sys.exit(main())
