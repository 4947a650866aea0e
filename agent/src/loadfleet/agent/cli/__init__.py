"""The `loadfleet-agent` command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import signal
import socket
import sys
from pathlib import Path

from loadfleet.wire import DEFAULT_CONTROLLER, dial
from loadfleet.wire.allowlist import ALLOW_TARGETS_ENV, LOOPBACK_ONLY, AllowList, AllowListError
from loadfleet.wire.dial import ClientCredentials

from .. import __version__
from ..credentials import agent_id
from ..engine import find_engine
from ..errors import AgentError, UsageError
from ..guard import LoadPolicy
from ..hoststats import MonitorConfig, process_groups
from ..outbox import DEFAULT_MEMORY_LIMIT
from ..servercounters import CounterSource, counter_sources
from ..session import Agent, AgentConfig
from ..spool import DEFAULT_LIMIT_MB

CONTROLLER_ENV = dial.CONTROLLER_ENV


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
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples (TLS flags from $LOADFLEET_TLS_CA/_CERT/_KEY; docs/security.md):\n"
        "  loadfleet-agent --controller 10.0.0.5:7700 --tls-ca pki/ca.crt --tls-cert pki/agent-load-1.crt "
        "--tls-key pki/agent-load-1.key --allow-targets 10.0.0.0/24\n"
        "  loadfleet-agent --controller 10.0.0.5:7700 --labels zone=a,rack=3\n"
        "  loadfleet-agent --controller 10.0.0.5:7700 --monitor --target http://10.0.0.7:8080 --process nginx\n"
        "  loadfleet-agent --controller 10.0.0.5:7700 --monitor --role nfs --process ganesha.nfsd\n"
        "  loadfleet-agent --controller 10.0.0.5:7700 --monitor --role lb --process haproxy "
        "--haproxy-stats /run/haproxy/admin.sock",
    )
    parser.add_argument("--version", action="version", version=f"loadfleet-agent {__version__}")
    parser.add_argument(
        "--controller",
        default=os.environ.get(CONTROLLER_ENV, DEFAULT_CONTROLLER),
        metavar="HOST:PORT",
        help=f"controller address (default ${CONTROLLER_ENV} or {DEFAULT_CONTROLLER})",
    )
    parser.add_argument(
        "--id",
        dest="agent_id",
        help="agent id shown in results (default: the name in --tls-cert or the token file, else HOSTNAME-PID)",
    )
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
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    security = parser.add_argument_group(
        "security",
        "how to reach a controller that serves TLS (docs/security.md); each flag defaults to its environment variable",
    )
    security.add_argument(
        "--tls-ca", metavar="FILE", help=f"CA that signed the controller's certificate (${dial.TLS_CA_ENV})"
    )
    security.add_argument(
        "--tls-cert",
        metavar="FILE",
        help=f"this agent's certificate; its name is the agent's id (${dial.TLS_CERT_ENV})",
    )
    security.add_argument("--tls-key", metavar="FILE", help=f"its private key (${dial.TLS_KEY_ENV})")
    security.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"instead of a certificate: a file with this agent's `agent NAME TOKEN` line (${dial.TOKEN_FILE_ENV})",
    )
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
    monitor = parser.add_argument_group(
        "monitor-only mode",
        "run no load; report this host (a target server, an NFS server, a balancer) "
        "with every heartbeat, so that runs show the servers' CPU, memory and network next to the load",
    )
    monitor.add_argument("--monitor", action="store_true", help="monitor this host instead of generating load")
    monitor.add_argument(
        "--target",
        dest="targets",
        action="append",
        default=[],
        metavar="URL",
        help="a plan target this host serves, as the plan writes it (repeatable)",
    )
    monitor.add_argument("--role", default="", help='what the host is when not a target itself, e.g. "nfs", "lb"')
    monitor.add_argument(
        "--process",
        dest="processes",
        action="append",
        default=[],
        metavar="NAME",
        help="report the processes of this name, e.g. nginx, ganesha.nfsd (repeatable)",
    )
    monitor.add_argument(
        "--pid-file",
        dest="pid_files",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="report the process in this PID file and its children (repeatable)",
    )
    monitor.add_argument(
        "--interfaces",
        default="",
        metavar="IF[,IF]",
        help="network interfaces to count (default all but loopback; lo for a loopback lab)",
    )
    monitor.add_argument(
        "--haproxy-stats",
        action="append",
        default=[],
        metavar="SOCKET",
        help="read HAProxy's counters (`show stat`) from this stats socket (repeatable)",
    )
    monitor.add_argument(
        "--varnish-stats",
        action="append",
        default=[],
        metavar="WORKDIR",
        help="read Varnish's counters with `varnishstat -n WORKDIR` (repeatable)",
    )
    monitor.add_argument(
        "--ganesha-stats",
        action="append",
        default=[],
        metavar="BUS_ADDRESS",
        help="read nfs-ganesha's per-client counters over the D-Bus at this address, "
        "e.g. unix:path=/run/ganesha/bus.sock (a path will do; repeatable)",
    )
    return parser


def monitor_config(args: argparse.Namespace) -> MonitorConfig | None:
    watches = (
        args.targets
        or args.role
        or args.processes
        or args.pid_files
        or args.interfaces
        or args.haproxy_stats
        or args.varnish_stats
        or args.ganesha_stats
    )
    if not args.monitor:
        if watches:
            raise UsageError(
                "--target, --role, --process, --pid-file, --interfaces and the --*-stats flags need --monitor"
            )
        return None
    if not (args.targets or args.role):
        raise UsageError("--monitor needs --target URL (the plan targets this host serves) or --role NAME")
    return MonitorConfig(
        targets=tuple(args.targets),
        role=args.role,
        groups=process_groups(args.processes, args.pid_files),
        interfaces=tuple(filter(None, args.interfaces.split(","))),
        servers=server_counters(haproxy=args.haproxy_stats, varnish=args.varnish_stats, ganesha=args.ganesha_stats),
    )


def server_counters(*, haproxy: list[str], varnish: list[str], ganesha: list[str]) -> tuple[CounterSource, ...]:
    """The servers named on the command line. Their sockets and directories must exist now (a
    server that goes down later only leaves its counters out), and so must the programs."""
    problems = [f"--haproxy-stats {p}: no such socket" for p in haproxy if not Path(p).is_socket()]
    problems += [f"--varnish-stats {p}: no such directory (varnishd -n)" for p in varnish if not Path(p).is_dir()]
    # Only a Unix socket path can be checked; other D-Bus addresses (tcp:, abstract) are taken as given.
    problems += [
        f"--ganesha-stats {a}: no such socket"
        for a in ganesha
        if (path := bus_socket(a)) and not Path(path).is_socket()
    ]
    for flag, values, program in (("--varnish-stats", varnish, "varnishstat"), ("--ganesha-stats", ganesha, "busctl")):
        if values and not shutil.which(program):
            problems.append(f"{flag} needs {program}, which is not on PATH")
    if problems:
        raise UsageError("; ".join(problems))
    return counter_sources(haproxy=haproxy, varnish=varnish, ganesha=ganesha)


def bus_socket(address: str) -> str:
    """The socket path of a D-Bus address `unix:path=PATH` or a plain path; "" for others."""
    if address.startswith("unix:path="):
        return address.removeprefix("unix:path=").split(",")[0]
    return "" if ":" in address else address


def default_spool_dir(agent_id: str) -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "loadfleet-agent" / agent_id


def load_policy(args: argparse.Namespace, env=os.environ) -> LoadPolicy:
    text = args.allow_targets or env.get(ALLOW_TARGETS_ENV, "")
    try:
        allow = AllowList.parse(text) if text.strip() else LOOPBACK_ONLY
    except AllowListError as exc:
        raise UsageError(f"--allow-targets: {exc}") from None
    root = args.gatling_root
    if root is not None and not root.is_dir():
        raise UsageError(f"--gatling-root {root}: no such directory")
    return LoadPolicy(allow=allow, gatling_root=root.resolve() if root else None)


def credentials(args: argparse.Namespace) -> ClientCredentials:
    try:
        return dial.client_credentials(
            tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key, token_file=args.token_file
        )
    except dial.CredentialsError as exc:
        raise UsageError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        creds = credentials(args)
        args.agent_id = agent_id(creds, args.agent_id, f"{socket.gethostname()}-{os.getpid()}")
    except UsageError as exc:
        print(f"loadfleet-agent: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), format=f"%(asctime)s %(levelname)s agent {args.agent_id}: %(message)s"
    )
    try:
        if args.cores < 1:
            raise UsageError("--cores must be at least 1")
        if not args.spool_limit_mb > 0:
            raise UsageError("--spool-limit-mb must be more than 0")
        if args.outbox_memory < 0:
            raise UsageError("--outbox-memory must be at least 0")
        monitor = monitor_config(args)
        config = AgentConfig(
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
