"""Fleet bench: a real controller process under a simulated fleet (N agents x R rows).

Run:  .venv/bin/python -m bench.fleet.bench --agents 100 --rows 10 --duration-s 60

It starts a controller (`loadfleet controller`, or --controller-cmd) pinned to one core,
K simulator processes (bench/fleet/sim.py) pinned to the other, waits until every
simulated agent is idle on the controller, starts a run of N agents x R rows through
RunService.StartRun and follows it with WatchRun. Recorded over time: the controller's
CPU per interval and its RSS every few seconds, the publish lag of every interval, the
fleet's lease renewal lateness and ack latency, and whether every interval arrived
complete (agents == N, requests == what the fleet sent). Results go to
bench/fleet/results/<date>-<agents>x<rows>-<interval>ms-<duration>s.json with the exact
command; a markdown table for docs/benchmarks.md is printed. Exit status 0 when the run
finished with every interval complete, 1 otherwise. See bench/fleet/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.fleet.fleetsim import tls
from bench.fleet.fleetsim.children import Children
from bench.fleet.fleetsim.plan import fleet_plan, row_shape
from bench.fleet.fleetsim.procstat import ProcessSampler, RssGuard, mem_total_kb, rss_kb
from bench.fleet.fleetsim.report import log_notes, markdown, summarize_run
from bench.fleet.fleetsim.watch import RunRecord, follow_run, start_run, stop_run, wait_for_agents
from bench.limits import raise_fd_limit
from loadfleet.v1 import run_pb2_grpc

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS_DIR = HERE / "results"
# The simulator, run as a module: the child inherits what made `bench` importable here
# (the working directory, the repository's root, or PYTHONPATH).
SIM = ("-m", "bench.fleet.sim")
DEFAULT_CONTROLLER_CMD = f"{Path(sys.executable).parent / 'loadfleet'} controller"
DEFAULT_AGENTS = 100
DEFAULT_ROWS = 10
DEFAULT_INTERVAL_MS = 1000
DEFAULT_DURATION_S = 60.0
DEFAULT_RSS_EVERY_S = 2.0
CONTROLLER_CORE = "0"
SIM_CORES = "1"
# Waiting for the controller to listen, and for each batch of simulated agents to connect.
CONTROLLER_START_S = 30.0
AGENTS_WAIT_BASE_S = 30.0
AGENTS_WAIT_PER_AGENT_S = 0.05
# Beyond the run's length: barrier lead, the controller's grace and end-of-run work.
RUN_SLACK_S = 120.0
SETTLE_AFTER_RUN_S = 2.0


@dataclass(frozen=True)
class BenchConfig:
    agents: int
    rows: int
    interval_ms: int
    duration_s: float
    processes: int
    controller_cmd: str
    controller_label: str
    controller_core: str
    sim_cores: str
    rss_every_s: float
    total_row: str
    outbox: int
    max_controller_rss_mb: int
    # Mutual TLS between the fleet and the controller (fleetsim/tls.py).
    tls: bool = False


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="the issue-12 measurement: --agents 1000 --rows 10 --duration-s 1800 --processes 2",
    )
    parser.add_argument(
        "--agents", type=int, default=DEFAULT_AGENTS, help=f"simulated agents (default {DEFAULT_AGENTS})"
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=DEFAULT_ROWS,
        help=f"rows per agent report = targets x request names of the plan (default {DEFAULT_ROWS})",
    )
    parser.add_argument(
        "--interval-ms", type=int, default=DEFAULT_INTERVAL_MS, choices=[250, 500, 1000, 2000, 5000, 10000]
    )
    parser.add_argument(
        "--duration-s", type=float, default=DEFAULT_DURATION_S, help=f"load duration (default {DEFAULT_DURATION_S:g})"
    )
    parser.add_argument("--processes", type=int, default=1, help="simulator processes the agents are spread over")
    parser.add_argument(
        "--controller-cmd",
        default=DEFAULT_CONTROLLER_CMD,
        help="command that serves a controller; --listen and --runs-dir are appended "
        "(default: this checkout's `loadfleet controller`)",
    )
    parser.add_argument(
        "--controller-label",
        default="",
        help="name of the controller in the table (default: pre-streaming or streaming, from its Welcome)",
    )
    parser.add_argument(
        "--controller-core",
        default=CONTROLLER_CORE,
        help=f"taskset cores of the controller (default {CONTROLLER_CORE})",
    )
    parser.add_argument(
        "--sim-cores", default=SIM_CORES, help=f"taskset cores of the simulators and this script (default {SIM_CORES})"
    )
    parser.add_argument("--rss-every-s", type=float, default=DEFAULT_RSS_EVERY_S, help="controller RSS sampling period")
    parser.add_argument(
        "--total-row",
        choices=["auto", "always", "never"],
        default="auto",
        help="send each agent's */* merge row: auto = only to a controller that names its instance",
    )
    parser.add_argument("--outbox", type=int, default=1000, help="unacknowledged messages kept per simulated agent")
    parser.add_argument(
        "--max-controller-rss-mb",
        type=int,
        default=mem_total_kb() // 1024 // 4,
        help="stop the run (and kill the controller if that does not help) past this RSS "
        "(default a quarter of this machine's memory)",
    )
    parser.add_argument("--out", type=Path, help="results file (default bench/fleet/results/<date>-<shape>.json)")
    parser.add_argument("--keep-work", action="store_true", help="keep the controller's log and run directory")
    parser.add_argument(
        "--tls", action="store_true", help="mutual TLS: every simulated agent and the bench show their own certificate"
    )
    args = parser.parse_args(argv)
    problems = [
        text
        for text, bad in [
            ("--agents must be >= 1", args.agents < 1),
            ("--rows must be >= 1", args.rows < 1),
            ("--duration-s must be >= 1", args.duration_s < 1),
            ("--processes must be between 1 and --agents", not 1 <= args.processes <= args.agents),
            ("--rss-every-s must be > 0", args.rss_every_s <= 0),
            ("--outbox must be >= 1", args.outbox < 1),
            ("taskset is needed (util-linux)", shutil.which("taskset") is None),
        ]
        if bad
    ]
    if problems:
        parser.error("; ".join(problems))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = BenchConfig(
        agents=args.agents,
        rows=args.rows,
        interval_ms=args.interval_ms,
        duration_s=args.duration_s,
        processes=args.processes,
        controller_cmd=args.controller_cmd,
        controller_label=args.controller_label,
        controller_core=args.controller_core,
        sim_cores=args.sim_cores,
        rss_every_s=args.rss_every_s,
        total_row=args.total_row,
        outbox=args.outbox,
        max_controller_rss_mb=args.max_controller_rss_mb,
        tls=args.tls,
    )
    command = shlex.join(["python", "-m", "bench.fleet.bench", *(sys.argv[1:] if argv is None else argv)])
    raise_fd_limit(4 * config.agents + 1024)  # children inherit it: one socket per agent on each side
    os.sched_setaffinity(0, {int(c) for c in config.sim_cores.split(",")})  # off the controller's core
    work = Path(tempfile.mkdtemp(prefix="loadfleet-fleet-bench-"))
    children = Children(work)
    ok = False
    try:
        result = run_bench(config, children, work)
        result = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "command": command,
            "machine": machine(),
            **result,
            "controller_log": log_notes(children.log_path("controller")),
        }
        out = args.out or RESULTS_DIR / (
            f"{time.strftime('%Y-%m-%d')}-{config.agents}x{config.rows}-{config.interval_ms}ms-"
            f"{config.duration_s:g}s.json"
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(markdown(result))
        print(f"\ncommand: {command}\nresults: {out}")
        summary = result["summary"]
        ok = summary["run"]["state"] == "finished" and summary["intervals"]["all_complete"]
        if not ok:
            print(
                f"NOT OK: run {summary['run']['state'] or 'did not end'} {summary['run']['error']}, "
                f"{summary['intervals']['complete']}/{summary['intervals']['sent']} intervals complete; "
                f"logs in {work}",
                file=sys.stderr,
            )
    finally:
        children.stop_all()
        if ok and not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work directory kept: {work}", file=sys.stderr)
    return 0 if ok else 1


def run_bench(config: BenchConfig, children: Children, work: Path) -> dict:
    port = free_port()
    address = f"127.0.0.1:{port}"
    pki = work / "pki" if config.tls else None
    if pki:
        tls.make_pki(pki, [f"sim{k}-{i:05d}" for k, share in enumerate(shares(config)) for i in range(share)])
    controller = children.start(
        "controller",
        [
            "taskset",
            "-c",
            config.controller_core,
            *shlex.split(config.controller_cmd),
            "--listen",
            address,
            "--runs-dir",
            str(work / "runs"),
            *(tls.controller_args(pki) if pki else []),
        ],
    )
    wait_for_port(port, CONTROLLER_START_S, controller, children)
    label = ("fleetsim", f"run-{secrets.token_hex(4)}")  # never all digits and an "e": YAML would read a number
    sims = start_sims(config, children, work, address, label, pki)
    record, sampler, guard, rss_after = asyncio.run(measure(config, address, controller.pid, label, children, pki))
    results = collect_sims(children, sims, work)
    summary = summarize_run(
        agents=config.agents,
        rows=config.rows,
        interval_ms=config.interval_ms,
        record=record,
        cpu=sampler.cpu,
        rss=sampler.rss,
        sims=results,
        rss_after_run_kb=rss_after,
    )
    summary["run"]["rss_limit"] = {
        "limit_kb": guard.limit_kb,
        "tripped_at_kb": guard.tripped_at_kb,
        "controller_killed": guard.killed,
    }
    instances = summary["fleet"]["controller_instances"]
    targets, names = row_shape(config.rows)
    return {
        "config": {**asdict(config), "targets": targets, "request_names": names, "bench_commit": git_commit()},
        "controller_label": config.controller_label
        or (("streaming" if instances else "pre-streaming") + (", mutual TLS" if config.tls else "")),
        "summary": summary,
    }


def shares(config: BenchConfig) -> list[int]:
    """Simulated agents per simulator process."""
    return [config.agents // config.processes + (k < config.agents % config.processes) for k in range(config.processes)]


def start_sims(
    config: BenchConfig, children: Children, work: Path, address: str, label: tuple[str, str], pki: Path | None = None
) -> list[str]:
    names = []
    max_s = AGENTS_WAIT_BASE_S + config.agents * AGENTS_WAIT_PER_AGENT_S + config.duration_s + 2 * RUN_SLACK_S
    for k, share in enumerate(shares(config)):
        name = f"sim{k}"
        children.start(
            name,
            [
                "taskset",
                "-c",
                config.sim_cores,
                sys.executable,
                *SIM,
                "--controller",
                address,
                "--agents",
                str(share),
                "--id-prefix",
                f"sim{k}-",
                "--label",
                f"{label[0]}={label[1]}",
                "--total-row",
                config.total_row,
                "--outbox",
                str(config.outbox),
                "--max-s",
                str(max_s),
                "--results",
                str(work / f"{name}.json"),
                *(["--tls-dir", str(pki)] if pki else []),
            ],
        )
        names.append(name)
    return names


async def measure(
    config: BenchConfig,
    address: str,
    controller_pid: int,
    label: tuple[str, str],
    children: Children,
    pki: Path | None = None,
) -> tuple[RunRecord, ProcessSampler, RssGuard, int | None]:
    sampler = ProcessSampler(controller_pid, config.interval_ms, config.rss_every_s)
    guard = RssGuard(controller_pid, config.max_controller_rss_mb * 1024)
    async with tls.channel(address, pki, "operator", tls.OPERATOR) as channel:
        stub = run_pb2_grpc.RunServiceStub(channel)
        wait_s = AGENTS_WAIT_BASE_S + config.agents * AGENTS_WAIT_PER_AGENT_S
        idle = await wait_for_agents(stub, label, config.agents, wait_s)
        if idle < config.agents:
            raise RuntimeError(
                f"only {idle} of {config.agents} simulated agents connected within {wait_s:g} s\n"
                + "\n".join(children.log_tail(n) for n in children.started if n.startswith("sim"))
            )
        plan = fleet_plan(
            agents=config.agents,
            rows=config.rows,
            interval_ms=config.interval_ms,
            duration_s=config.duration_s,
            label=label,
        )
        background = [asyncio.create_task(sampler.run(), name="controller-sampler")]
        try:
            record = await start_run(stub, plan)
            background.append(
                asyncio.create_task(
                    guard.run(lambda: stop_run(stub, record.run_id), children.started["controller"].kill),
                    name="rss-guard",
                )
            )
            await follow_run(stub, record, config.duration_s + RUN_SLACK_S)
            await asyncio.sleep(SETTLE_AFTER_RUN_S)
            rss_after = rss_if_alive(controller_pid)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
    return record, sampler, guard, rss_after


def rss_if_alive(pid: int) -> int | None:
    try:
        return rss_kb(pid)
    except (FileNotFoundError, ProcessLookupError):
        return None  # killed by the memory guard, or crashed


def collect_sims(children: Children, sims: list[str], work: Path) -> list[dict]:
    statuses = children.stop_many(sims, grace_s=60)
    results = []
    for name in sims:
        path = work / f"{name}.json"
        if not path.exists():
            raise RuntimeError(f"{name} wrote no results (exit status {statuses[name]}):\n{children.log_tail(name)}")
        results.append(json.loads(path.read_text()))
    return results


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout_s: float, proc: subprocess.Popen, children: Children) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the controller exited with status {proc.returncode}:\n{children.log_tail('controller')}"
            )
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the controller did not listen on port {port} within {timeout_s:g} s")


def machine() -> dict:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    # The machine is shared: the load before the bench started says how noisy it was.
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
    }


def git_commit() -> str:
    result = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
