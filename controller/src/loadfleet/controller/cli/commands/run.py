"""`loadfleet run`: run a plan on a controller's agents, or on N agents started here, and
follow it to its summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loadfleet.controller.model.errors import UsageError
from loadfleet.controller.plan.parse import load_plan
from loadfleet.controller.plan.shorthand import SHORTHAND_GRAMMAR
from loadfleet.controller.service.controller import DEFAULT_RUNS_DIR, Controller
from loadfleet.wire import DEFAULT_CONTROLLER
from loadfleet.wire.dial import ClientCredentials

from ..client import RunClient
from ..follow import follow
from ..local import local_cluster
from ..options import (
    CONTROLLER_ENV,
    CiOutputs,
    Subcommands,
    add_ci_output_options,
    add_client_security,
    add_controller_option,
    add_influx_options,
    add_target_option,
    add_threshold_option,
    ci_outputs,
    client_credentials,
    influx_config,
    spool_limit_mb,
    target_urls,
)


def add_parser(commands: Subcommands, name: str) -> None:
    p = commands.add_parser(
        name,
        help="run a plan and print live figures and a summary",
        description="Run a plan on a controller's agents (--controller), or on N agents "
        "started on this machine (--local N).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: loadfleet run plans/quickstart.yaml --local 2\n\n"
        "thresholds (docs/plans.md, a failed one exits 4):\n" + SHORTHAND_GRAMMAR,
    )
    p.add_argument("plan", type=Path, help="plan file (YAML)")
    where = p.add_mutually_exclusive_group()
    add_controller_option(where, f"controller to use (default ${CONTROLLER_ENV} or {DEFAULT_CONTROLLER})")
    where.add_argument("--local", type=int, metavar="N", help="start a controller and N agents here")
    p.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS_DIR, help="with --local: where run directories go")
    p.add_argument(
        "--monitor",
        action="append",
        default=[],
        metavar="PROCESS",
        help="with --local: also report this host's CPU, memory, network and the named server "
        "processes (e.g. nginx) in the results (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON (progress goes to stderr)")
    add_threshold_option(p)
    add_target_option(p)
    add_ci_output_options(p)
    add_client_security(p)
    add_influx_options(p)


async def handle(args: argparse.Namespace) -> int:
    # Problems are reported before anything starts; --threshold is part of the plan sent.
    plan = load_plan(args.plan, target_urls(args), args.threshold)
    outputs = ci_outputs(args)  # an unwritable --junit/--markdown is found before the run
    if args.monitor and args.local is None:
        raise UsageError(
            "--monitor goes with --local; on other hosts start `loadfleet-agent --monitor` next to the servers"
        )
    if args.local is not None:
        # Local: the plan's author owns this controller, so the plan may pick its InfluxDB.
        controller = Controller(
            runs_dir=args.runs_dir,
            influx=influx_config(args),
            allow_plan_influx=True,
            influx_spool_limit_mb=spool_limit_mb(args),
        )
        async with local_cluster(
            args.local, controller, monitor=tuple(args.monitor), targets=tuple(t.url for t in plan.targets)
        ) as address:
            return await _run_on(address, plan.to_yaml(), args.json, outputs=outputs)
    return await _run_on(args.controller, plan.to_yaml(), args.json, client_credentials(args), outputs)


async def _run_on(
    address: str,
    plan_yaml: str,
    as_json: bool,
    credentials: ClientCredentials = ClientCredentials(),
    outputs: CiOutputs = CiOutputs(),
) -> int:
    async with RunClient(address, credentials=credentials) as client:
        started = await client.start_run(plan_yaml)
        print(f"run {started.run_id} started on {address}", file=sys.stderr if as_json else sys.stdout, flush=True)
        return await follow(client, started.run_id, as_json, outputs)
