"""The controller's domain path alone, in one process: N agents' reports decoded
(convert.report_from_proto), added to the revision window and published through a real
RunPipeline (run directory, journal, totals, step measurement, drift, followers; no
InfluxDB), with no gRPC. It measures what the controller spends per interval besides its
sessions, in CPU time (so a busy machine inflates it less than wall time), and where
(`--profile` prints cProfile's top functions).

    .venv/bin/python -m bench.fleet.domain --agents 1000 --rows 10 --intervals 20 [--profile]

The fleet bench (bench.py) measures the whole controller with real sessions; this one says
which part of it a change moved.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import tempfile
import time
from pathlib import Path

from bench.fleet.fleetsim.payload import build_templates, histogram_pool, interval_message
from bench.fleet.fleetsim.plan import fleet_plan
from loadfleet.controller.fleet.jobs import ReportLimits
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.rpc.convert import report_from_proto
from loadfleet.controller.run.pipeline import RunPipeline
from loadfleet.controller.stream.contract import StepWindow
from loadfleet.controller.stream.window import IntervalWindow
from loadfleet.v1 import agent_pb2

JOB = "bench-domain"
START_MS = 1_800_000_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=10)
    parser.add_argument("--intervals", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions")
    args = parser.parse_args()
    plan = parse_plan(
        fleet_plan(
            agents=args.agents, rows=args.rows, interval_ms=1000, duration_s=args.intervals, label=("bench", "domain")
        )
    )
    pairs = [(t.url, r.name) for t in plan.targets for r in plan.requests]
    templates = build_templates(pairs, histogram_pool(), total_row=True)
    limits = ReportLimits.of_plan(plan, max_unnamed_rows=0)
    agents = [f"sim-{i:04d}" for i in range(args.agents)]
    rng = random.Random(3)
    messages = [
        [
            agent_pb2.AgentMessage.FromString(
                interval_message(
                    seq=i + 1,
                    job_id=JOB,
                    interval_start_ms=START_MS + 1000 * i,
                    interval_ms=1000,
                    template=rng.choice(templates),
                    final=i == args.intervals - 1,
                )
            )
            for i in range(args.intervals)
        ]
        for _ in agents
    ]
    with tempfile.TemporaryDirectory() as tmp:
        pipeline = RunPipeline("bench", plan, Path(tmp), heartbeat_ms=1000, sinks=[], on_stop=lambda reason: None)
        pipeline.start(agents=agents, hostnames=["bench"], clock_offsets_ms={})
        step = StepWindow(
            name="main",
            index=0,
            job_id=JOB,
            interval_ms=1000,
            load_start_ms=START_MS,
            load_end_ms=START_MS + 1000 * args.intervals,
            warmup_ms=0,
            cooldown_ms=0,
            load=plan.load.describe(),
            agent_detail=len(agents) * len(pairs) <= 2000,
        )
        window = IntervalWindow(
            revision_ms=3000,
            publish=lambda closed: pipeline.publish(closed, late={}),
            settle=lambda agent, seq: None,
        )
        window.open_step(step, agents)
        timings = {"decode": 0.0, "window and publish": 0.0}

        def run() -> None:
            for i in range(args.intervals):
                for agent, mine in zip(agents, messages):
                    started = time.process_time()
                    report = report_from_proto(agent, mine[i].seq, mine[i].interval, limits)
                    decoded = time.process_time()
                    window.add(report)
                    window.publish_due(START_MS + 1000 * i + 1000)
                    timings["decode"] += decoded - started
                    timings["window and publish"] += time.process_time() - decoded

        profile = cProfile.Profile() if args.profile else None
        cpu = time.process_time()
        if profile:
            profile.runcall(run)
        else:
            run()
        cpu = time.process_time() - cpu
    per_interval = {k: v / args.intervals * 1000 for k, v in timings.items()}
    print(
        f"{args.agents} agents x {args.rows} rows, {args.intervals} intervals: {cpu / args.intervals * 1000:.0f} ms "
        f"CPU per interval (" + ", ".join(f"{k} {v:.0f} ms" for k, v in per_interval.items()) + ")"
    )
    if profile:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
