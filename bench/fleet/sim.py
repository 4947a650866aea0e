"""One fleet simulator process: N simulated agents over real gRPC sessions to a controller.

Run:  .venv/bin/python -m bench.fleet.sim --controller 127.0.0.1:7700 --agents 100 --results sim.json

The agents speak the real agent protocol (proto/loadfleet/v1/agent.proto) but run no
engine and send no HTTP: each takes any assignment and reports realistic interval
statistics for it. The process runs until SIGTERM/SIGINT or --max-s, then writes what it
sent and measured to --results (JSON; bench/fleet/bench.py reads it). It prints
"ready N" once every session has been welcomed. See bench/fleet/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path

from bench.fleet.fleetsim.agent import TotalRow
from bench.fleet.fleetsim.fleet import FleetConfig, run_fleet
from bench.fleet.fleetsim.outbox import DEFAULT_CAPACITY


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--controller", required=True, metavar="HOST:PORT")
    parser.add_argument("--agents", type=int, required=True, help="simulated agents in this process")
    parser.add_argument("--id-prefix", default="sim-", help="agent ids are PREFIX00000, PREFIX00001, ...")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE", help="agent label (repeatable)")
    parser.add_argument(
        "--outbox",
        type=int,
        default=DEFAULT_CAPACITY,
        help=f"unacknowledged messages kept per agent before the oldest is dropped (default {DEFAULT_CAPACITY})",
    )
    parser.add_argument(
        "--total-row",
        choices=[m.value for m in TotalRow],
        default=TotalRow.AUTO.value,
        help="send the agent's */* merge row: auto = only to a controller that names its instance",
    )
    parser.add_argument("--max-s", type=float, default=3600.0, help="stop by itself after this long (default 3600)")
    parser.add_argument("--results", type=Path, required=True, help="where to write this process's results (JSON)")
    parser.add_argument("--tls-dir", type=Path, help="mutual TLS with the agents' certificates in this directory")
    args = parser.parse_args(argv)
    problems = [
        text
        for text, bad in [
            ("--agents must be >= 1", args.agents < 1),
            ("--outbox must be >= 1", args.outbox < 1),
            ("labels are KEY=VALUE", any("=" not in label for label in args.label)),
        ]
        if bad
    ]
    if problems:
        parser.error("; ".join(problems))
    return args


async def serve(config: FleetConfig) -> dict:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return await run_fleet(config, stop, on_ready=lambda: print(f"ready {config.agents}", flush=True))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s sim %(levelname)s %(message)s")
    config = FleetConfig(
        controller=args.controller,
        agents=args.agents,
        id_prefix=args.id_prefix,
        labels=tuple(tuple(label.split("=", 1)) for label in args.label),
        outbox_capacity=args.outbox,
        total_row=TotalRow(args.total_row),
        max_s=args.max_s,
        tls_dir=args.tls_dir,
    )
    results = asyncio.run(serve(config))
    partial = args.results.with_suffix(".partial")
    partial.write_text(json.dumps(results) + "\n")
    os.replace(partial, args.results)  # the bench never reads half a file
    return 0


if __name__ == "__main__":
    sys.exit(main())
