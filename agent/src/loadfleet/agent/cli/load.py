"""What this host offers and agrees to run: cores, labels and the engine program, and the
limits group (`--allow-targets`, `--gatling-root`, docs/security.md) read into a LoadPolicy."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from loadfleet.wire.allowlist import ALLOW_TARGETS_ENV, LOOPBACK_ONLY, AllowList, AllowListError

from ..errors import UsageError
from ..guard import LoadPolicy


def add_load_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cores",
        type=int,
        default=os.cpu_count() or 1,
        help="cores to use: one engine per core, and the controller's share (default all)",
    )
    parser.add_argument(
        "--labels", action="append", default=[], metavar="K=V[,K=V]", help="labels that plans can select agents by"
    )
    parser.add_argument("--engine", help="path of the loadfleet-engine program (default $LOADFLEET_ENGINE or PATH)")


def add_limit_options(parser: argparse.ArgumentParser) -> None:
    limits = parser.add_argument_group("what this agent agrees to run (docs/security.md)")
    limits.add_argument(
        "--allow-targets",
        metavar="CIDR|HOST[:PORT],...",
        help=f"where load may go: networks, addresses or host names, each with an optional port "
        f"(default ${ALLOW_TARGETS_ENV}, else loopback only: 127.0.0.0/8,::1)",
    )
    limits.add_argument(
        "--gatling-root",
        type=Path,
        metavar="DIR",
        help="run users' Gatling projects from under this directory only (default: none)",
    )


def check_cores(args: argparse.Namespace) -> None:
    if args.cores < 1:
        raise UsageError("--cores must be at least 1")


def parse_labels(items: list[str]) -> tuple[tuple[str, str], ...]:
    labels = {}
    for item in items:
        for pair in filter(None, item.split(",")):
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise UsageError(f"--labels takes key=value pairs, got {pair!r}")
            labels[key.strip()] = value.strip()
    return tuple(sorted(labels.items()))


def load_policy(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> LoadPolicy:
    text = args.allow_targets or env.get(ALLOW_TARGETS_ENV, "")
    try:
        allow = AllowList.parse(text) if text.strip() else LOOPBACK_ONLY
    except AllowListError as exc:
        raise UsageError(f"--allow-targets: {exc}") from None
    root = args.gatling_root
    if root is not None and not root.is_dir():
        raise UsageError(f"--gatling-root {root}: no such directory")
    return LoadPolicy(allow=allow, gatling_root=root.resolve() if root else None)
