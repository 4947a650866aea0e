"""The agent's one command: the parsed flags checked and made into an AgentConfig, then the
agent served until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import signal

from loadfleet.wire.dial import ClientCredentials

from ..engine import find_engine
from ..session import Agent, AgentConfig
from .load import check_cores, load_policy, parse_labels
from .monitor import monitor_config
from .spooling import check_spool_options, default_spool_dir


def agent_config(args: argparse.Namespace, creds: ClientCredentials) -> AgentConfig:
    """The agent's configuration; UsageError for the first flag that is wrong, AgentError when no
    engine program can be found for a load agent."""
    check_cores(args)
    check_spool_options(args)
    monitor = monitor_config(args)
    return AgentConfig(
        controller=args.controller,
        agent_id=args.agent_id,
        engine_program="" if monitor else find_engine(args.engine),
        cores=args.cores,
        labels=parse_labels(args.labels),
        spool_dir=args.spool_dir or default_spool_dir(args.agent_id),
        monitor=monitor,
        spool_limit_mb=args.spool_limit_mb,
        outbox_memory=args.outbox_memory,
        credentials=creds,
        policy=load_policy(args),
    )


async def serve(config: AgentConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await Agent(config).run(stop)
