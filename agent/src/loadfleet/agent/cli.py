"""The `loadfleet-agent` command."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from loadfleet.wire import DEFAULT_CONTROLLER

from . import __version__
from .engine import find_engine
from .errors import AgentError, UsageError
from .session import Agent, AgentConfig

CONTROLLER_ENV = "LOADFLEET_CONTROLLER"


def parse_labels(items: list[str]) -> tuple[tuple[str, str], ...]:
    labels = {}
    for item in items:
        for pair in filter(None, item.split(",")):
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise UsageError(f"--labels takes key=value pairs, got {pair!r}")
            labels[key.strip()] = value.strip()
    return tuple(sorted(labels.items()))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadfleet-agent",
        description="Connect to a loadfleet controller and run the load it assigns on this host.",
        epilog="example: loadfleet-agent --controller 10.0.0.5:7700 --labels zone=a,rack=3")
    parser.add_argument("--version", action="version", version=f"loadfleet-agent {__version__}")
    parser.add_argument("--controller", default=os.environ.get(CONTROLLER_ENV, DEFAULT_CONTROLLER),
                        metavar="HOST:PORT", help=f"controller address (default ${CONTROLLER_ENV} or {DEFAULT_CONTROLLER})")
    parser.add_argument("--id", dest="agent_id", default=f"{socket.gethostname()}-{os.getpid()}",
                        help="agent id shown in results (default HOSTNAME-PID)")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                        help="cores to use: one engine per core, and the controller's share (default all)")
    parser.add_argument("--labels", action="append", default=[], metavar="K=V[,K=V]",
                        help="labels that plans can select agents by")
    parser.add_argument("--engine", help="path of the loadfleet-engine program (default $LOADFLEET_ENGINE or PATH)")
    parser.add_argument("--spool-dir", type=Path,
                        help="where measurements wait on disk while the controller is unreachable "
                             "(default $XDG_STATE_HOME/loadfleet-agent/<id>, i.e. ~/.local/state/...)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser


def default_spool_dir(agent_id: str) -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "loadfleet-agent" / agent_id


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format=f"%(asctime)s %(levelname)s agent {args.agent_id}: %(message)s")
    try:
        if args.cores < 1:
            raise UsageError("--cores must be at least 1")
        config = AgentConfig(controller=args.controller, agent_id=args.agent_id,
                             engine_program=find_engine(args.engine), cores=args.cores,
                             labels=parse_labels(args.labels),
                             spool_dir=args.spool_dir or default_spool_dir(args.agent_id))
        asyncio.run(_serve(config))
    except UsageError as exc:
        print(f"loadfleet-agent: {exc}", file=sys.stderr)
        return 2
    except AgentError as exc:
        print(f"loadfleet-agent: {exc}", file=sys.stderr)
        return 1
    return 0


async def _serve(config: AgentConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await Agent(config).run(stop)


if __name__ == "__main__":
    sys.exit(main())
