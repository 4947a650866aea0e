"""Where measurements wait while the controller is unreachable: `--spool-dir`, `--spool-limit-mb`
and `--outbox-memory`, their checks and the spool's default directory."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..errors import UsageError
from ..outbox import DEFAULT_MEMORY_LIMIT
from ..spool import DEFAULT_LIMIT_MB


def add_spool_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spool-dir",
        type=Path,
        help="where measurements wait on disk while the controller is unreachable "
        "(default $XDG_STATE_HOME/loadfleet-agent/<id>, i.e. ~/.local/state/...)",
    )
    parser.add_argument(
        "--spool-limit-mb",
        type=float,
        default=DEFAULT_LIMIT_MB,
        metavar="MIB",
        help=f"most the spool may hold; beyond, its oldest measurements are dropped, counted "
        f"and reported to the run (default {DEFAULT_LIMIT_MB:g})",
    )
    parser.add_argument(
        "--outbox-memory",
        type=int,
        default=DEFAULT_MEMORY_LIMIT,
        metavar="N",
        help=f"unacknowledged messages kept in memory before they go to the spool (default {DEFAULT_MEMORY_LIMIT})",
    )


def check_spool_options(args: argparse.Namespace) -> None:
    if not args.spool_limit_mb > 0:
        raise UsageError("--spool-limit-mb must be more than 0")
    if args.outbox_memory < 0:
        raise UsageError("--outbox-memory must be at least 0")


def default_spool_dir(agent_id: str) -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "loadfleet-agent" / agent_id
