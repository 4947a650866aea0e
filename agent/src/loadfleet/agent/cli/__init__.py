"""The `loadfleet-agent` command: one command, so no command map; its parts by concern.

    parser.py       build_parser: the option groups in --help's order
    connection.py   --controller, --id, the security group -> credentials, the agent's id
    load.py         --cores, --labels, --engine, the limits group -> LoadPolicy
    spooling.py     --spool-dir, --spool-limit-mb, --outbox-memory
    monitor.py      monitor-only mode -> MonitorConfig
    serve.py        the handler: flags -> AgentConfig, then the agent until SIGINT/SIGTERM

Exit codes: 0 when stopped by a signal, 1 for an AgentError, 2 for a UsageError (errors.py).
"""

from __future__ import annotations

import asyncio
import logging
import sys

from ..errors import AgentError, UsageError
from .connection import CONTROLLER_ENV, credentials, resolve_agent_id
from .load import load_policy, parse_labels
from .monitor import bus_socket, monitor_config, server_counters
from .parser import build_parser
from .serve import agent_config, serve
from .spooling import default_spool_dir

__all__ = [
    "CONTROLLER_ENV",
    "build_parser",
    "bus_socket",
    "credentials",
    "default_spool_dir",
    "load_policy",
    "main",
    "monitor_config",
    "parse_labels",
    "server_counters",
]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        creds = credentials(args)
        args.agent_id = resolve_agent_id(args, creds)
    except UsageError as exc:
        return _failed(exc)
    logging.basicConfig(
        level=args.log_level.upper(), format=f"%(asctime)s %(levelname)s agent {args.agent_id}: %(message)s"
    )
    try:
        asyncio.run(serve(agent_config(args, creds)))
    except AgentError as exc:
        return _failed(exc)
    return 0


def _failed(exc: AgentError) -> int:
    """Say what went wrong; the exit code: 2 for bad command-line input, else 1."""
    print(f"loadfleet-agent: {exc}", file=sys.stderr)
    return 2 if isinstance(exc, UsageError) else 1
