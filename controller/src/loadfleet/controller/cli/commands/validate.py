"""`loadfleet validate`: check a plan and list its problems, stage by stage (nothing starts)."""

from __future__ import annotations

import argparse
from pathlib import Path

from loadfleet.controller.model.errors import EXIT_OK
from loadfleet.controller.plan.parse import load_plan
from loadfleet.controller.plan.shorthand import SHORTHAND_GRAMMAR

from ..options import Subcommands, add_target_option, add_threshold_option, target_urls


def add_parser(commands: Subcommands, name: str) -> None:
    p = commands.add_parser(
        name,
        help="check a plan and list its problems (the first stage that finds any)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: loadfleet validate plan.yaml --threshold 'p99_ms<250'\n\n" + SHORTHAND_GRAMMAR,
    )
    p.add_argument("plan", type=Path)
    add_threshold_option(p)
    add_target_option(p)


async def handle(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan, target_urls(args), args.threshold)
    load = (
        f"a sweep of {plan.sweep.total_steps} steps of {plan.sweep.step_s:g} s" if plan.sweep else plan.describe_load()
    )
    thresholds = f", {len(plan.thresholds)} thresholds" if plan.thresholds else ""
    requests = sum(len(s.requests) for s in plan.each_scenario())
    scenarios = f", {len(plan.scenarios)} scenarios" if plan.scenarios else ""
    print(
        f"{args.plan}: ok ({len(plan.targets)} targets, {requests} requests{scenarios}, {load}, "
        f"{plan.duration_s:g} s{thresholds})"
    )
    return EXIT_OK
