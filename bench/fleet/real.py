"""Real fleet bench: a real controller and N real agents (one core each, real engines)
against real nginx on loopback, for minutes.

Run:  .venv/bin/python -m bench.fleet.real --agents 63 --duration-s 180

Where bench.py simulates agents to reach a thousand, this one runs the real thing at the
size of the classic cluster studies: N `loadfleet-agent --cores 1` processes, each
with its engine, an open-model load spread over two nginx servers, the controller pinned to
one core. Recorded like bench.py: the controller's CPU per interval and RSS over time,
the publish lag of every interval, whether every interval had all N agents, and at the end
whether the requests counted equal the lines nginx logged. Results go to
bench/fleet/results/<date>-real-<agents>-<duration>s.json with the exact command.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

import grpc
import yaml

from bench.fleet.fleetsim.children import Children
from bench.fleet.fleetsim.procstat import ProcessSampler
from bench.fleet.fleetsim.report import cpu_figures, percentile, rss_figures
from bench.fleet.fleetsim.watch import follow_run, start_run, wait_for_agents
from loadfleet.targets.nginx import NginxServer
from loadfleet.v1 import run_pb2_grpc

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
CONTROLLER_CORE, AGENT_CORES = "0", "1"
LABEL = ("fleet", "real")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan_yaml(urls: list[str], agents: int, rate: float, duration_s: float) -> str:
    return yaml.safe_dump(
        {
            "name": f"real-fleet-{agents}",
            "duration_s": duration_s,
            "targets": [{"url": u} for u in urls],
            "workload": {
                "requests": [{"name": "index", "path": "/index.html"}, {"name": "small", "path": "/small.html"}]
            },
            "load": {"model": "open", "rate": rate, "max_connections": 4 * agents},
            "agents": {"count": agents, "labels": dict([LABEL]), "wait_s": 60},
        }
    )


async def bench(args, work: Path) -> dict:
    docroot = work / "docroot"
    docroot.mkdir()
    (docroot / "index.html").write_text("x" * 1024)
    (docroot / "small.html").write_text("y" * 128)
    webs = [
        NginxServer(host, free_port(), docroot, work / "nginx", f"web{i + 1}")
        for i, host in enumerate(("127.0.0.2", "127.0.0.3"))
    ]
    children = Children(work)
    port = free_port()
    address = f"127.0.0.1:{port}"
    for web in webs:
        web.start()
    try:
        controller = children.start(
            "controller",
            [
                "taskset",
                "-c",
                CONTROLLER_CORE,
                str(BIN / "loadfleet"),
                "controller",
                "--listen",
                address,
                "--runs-dir",
                str(work / "runs"),
            ],
        )
        for i in range(args.agents):
            children.start(
                f"agent-{i}",
                [
                    "taskset",
                    "-c",
                    AGENT_CORES,
                    str(BIN / "loadfleet-agent"),
                    "--controller",
                    address,
                    "--id",
                    f"real-{i:02d}",
                    "--cores",
                    "1",
                    "--labels",
                    f"{LABEL[0]}={LABEL[1]}",
                    "--spool-dir",
                    str(work / "spool" / str(i)),
                ],
            )
        async with grpc.aio.insecure_channel(address) as channel:
            stub = run_pb2_grpc.RunServiceStub(channel)
            await asyncio.sleep(1)
            idle = await wait_for_agents(stub, LABEL, args.agents, timeout_s=120)
            if idle < args.agents:
                raise SystemExit(f"only {idle} of {args.agents} agents connected")
            sampler = ProcessSampler(controller.pid, 1000, args.rss_every_s)
            sampling = asyncio.create_task(sampler.run())
            record = await start_run(stub, plan_yaml([w.url for w in webs], args.agents, args.rate, args.duration_s))
            record = await follow_run(stub, record, timeout_s=args.duration_s + 120)
            await asyncio.sleep(2)
            sampling.cancel()
            await asyncio.gather(sampling, return_exceptions=True)
        served = sum(w.access_log_lines() for w in webs)
    finally:
        children.stop_all()
        for web in webs:
            web.stop()
    arrivals = [a for a in record.arrivals]
    load_ms = (arrivals[0].interval_start_ms, arrivals[-1].interval_start_ms + 1000) if arrivals else (0, 0)
    lags = [a.arrived_ms - (a.interval_start_ms + 1000) for a in arrivals]
    return {
        "command": shlex.join(["python", "-m", "bench.fleet.real", *sys.argv[1:]]),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "agents": args.agents,
        "rate": args.rate,
        "duration_s": args.duration_s,
        "state": record.state,
        "message": record.message,
        "intervals": len(arrivals),
        "complete": sum(a.agents == args.agents for a in arrivals),
        "requests_counted": record.summary_requests,
        "requests_served": served,
        "controller_cpu": cpu_figures(sampler.cpu, load_ms, 1000, record.finished_ms),
        "controller_rss": rss_figures(
            sampler.rss, load_ms, reference_s=min(120.0, args.duration_s / 2), row_reports_per_s=args.agents * 4
        ),
        "publish_lag_ms": {"p50": percentile(lags, 50), "p99": percentile(lags, 99), "max": max(lags, default=None)},
        "rss_series_kb": [(s.at_ms, s.rss_kb) for s in sampler.rss],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=63)
    parser.add_argument("--rate", type=float, default=2000.0, help="requests/s of the whole fleet (default 2000)")
    parser.add_argument("--duration-s", type=float, default=180.0)
    parser.add_argument("--rss-every-s", type=float, default=2.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loadfleet-real-fleet-") as tmp:
        result = asyncio.run(bench(args, Path(tmp)))
    out = args.out or HERE / "results" / f"{time.strftime('%Y-%m-%d')}-real-{args.agents}-{int(args.duration_s)}s.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    cpu, rss, lag = result["controller_cpu"], result["controller_rss"], result["publish_lag_ms"]
    print(
        f"| {args.agents} real agents | {args.rate:g} req/s | {args.duration_s:g} s | "
        f"{cpu['median_pct']} / {cpu['p95_pct']} | {rss.get('at_reference_kb', 0) // 1024} MB → "
        f"{rss.get('at_end_kb', 0) // 1024} MB ({rss.get('growth_pct')} %) | {lag['p99']} ms | "
        f"{result['complete']}/{result['intervals']} | {result['requests_counted']} counted, "
        f"{result['requests_served']} served |"
    )
    print(f"results: {out}")
    ok = result["state"] == "finished" and result["requests_counted"] == result["requests_served"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
