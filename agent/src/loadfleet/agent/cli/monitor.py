"""Monitor-only mode: the flags that make this agent report a host instead of generating load,
and their reading into a MonitorConfig (the servers named must exist now)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from ..errors import UsageError
from ..hoststats import MonitorConfig, process_groups
from ..servercounters import CounterSource, counter_sources


def add_monitor_options(parser: argparse.ArgumentParser) -> None:
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
    _add_server_options(monitor)


def _add_server_options(monitor: argparse._ArgumentGroup) -> None:
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
