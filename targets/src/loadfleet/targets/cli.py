"""loadfleet-lab: bring a local web cluster up or down — on loopback, or on hosts of its own
(network namespaces) with a controller and agents — and run commands on its hosts.

Exit codes: 0 done, 1 a server could not be started or stopped (`restart`: with its error
log's tail), 2 bad usage or spec (`restart`: a server name the lab does not have); `exec`
exits with its command's code.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path
from typing import Any

from .daemon import LabError
from .hostlab import run_on_host
from .lab import Lab, LabSpec, SpecError, load_spec
from .netns import guard_present, list_namespaces
from .restart import UnknownServers, keep_spec, restart_lab
from .spec import parse_spec
from .workload import DEFAULT_FILE_COUNT, DEFAULT_SINGLE_BYTES, WORKLOAD_KINDS, WorkloadSpec, generate

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadfleet-lab",
        description="Start and stop local web clusters (real nginx, Apache, Tomcat, Yaws, PHP-FPM, MariaDB, HAProxy "
        "and Varnish on loopback addresses, or on hosts of their own in network namespaces with a controller and "
        "agents) serving a generated workload, for loadfleet demos, tests and reproductions.",
        epilog="example: loadfleet-lab up targets/specs/quickstart.yaml --state-dir build/lab && "
        "loadfleet-lab down --state-dir build/lab; with hosts: loadfleet-lab exec --state-dir build/lab ctrl -- "
        "loadfleet run plan.yaml; before a measurement: loadfleet-lab restart --state-dir build/lab. "
        "Exit codes: 0 done, 1 a server could not be started or stopped, 2 bad usage, spec or server name.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="generate the workload tree (if needed) and start the servers")
    up.add_argument("spec", type=Path, help="lab spec (YAML), e.g. targets/specs/quickstart.yaml")
    tree = sub.add_parser("tree", help="only generate a workload into a directory (e.g. a shared docroot)")
    tree.add_argument("docroot", type=Path)
    tree.add_argument("--kind", choices=WORKLOAD_KINDS, default="tree", help="which workload (default tree)")
    tree.add_argument("--scale", type=float, help="tree: directories = 4 x scale (default 1.0, ~20 MB)")
    tree.add_argument("--seed", type=int, help="same seed, same bytes (default 1)")
    tree.add_argument("--bytes", type=int, help=f"single: the page's size (default {DEFAULT_SINGLE_BYTES})")
    tree.add_argument("--count", type=int, help=f"files30k, files100k: how many files (default {DEFAULT_FILE_COUNT})")
    for name, text in (
        ("down", "stop the servers of a state directory"),
        ("status", "list the servers of a state directory"),
    ):
        sub.add_parser(name, help=text)
    run = sub.add_parser(
        "exec",
        help="run a command on a lab host (in its network namespace), with the lab "
        "controller's address and operator credentials in LOADFLEET_* variables",
    )
    run.add_argument("host", help="a host of the lab spec, e.g. ctrl")
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="e.g. -- loadfleet run plan.yaml")
    restart = sub.add_parser(
        "restart",
        help="stop and start servers of a running lab on the same addresses and ports (all by default, "
        "in dependency order), so a measurement starts from fresh servers",
    )
    restart.add_argument("servers", nargs="*", metavar="SERVER", help="names of the lab spec (default: all)")
    for p in (sub.choices[name] for name in ("up", "down", "status", "exec", "restart")):
        p.add_argument("--state-dir", type=Path, required=True, help="where configs, logs, PIDs and the docroot live")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "up":
            return _up(load_spec(args.spec), args.state_dir, args.spec)
        if args.command == "restart":
            return _restart(args.state_dir, args.servers)
        if args.command == "tree":
            manifest = generate(args.docroot, _workload_from_args(args))
            print(
                f"{len(manifest.files)} files, {manifest.total_bytes} bytes; manifest: {args.docroot / 'manifest.json'}"
            )
            return EXIT_OK
        lab = Lab(LabSpec(WorkloadSpec(), ()), args.state_dir)
        if args.command == "exec":
            argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
            if not argv:
                print("loadfleet-lab: error: exec needs a command after --", file=sys.stderr)
                return EXIT_USAGE
            return run_on_host(lab.state(), args.host, argv)
        if args.command == "down":
            stopped = lab.down()
            print(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")
        else:
            _status(lab)
        return EXIT_OK
    except SpecError as exc:
        for problem in exc.problems:
            print(f"loadfleet-lab: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except (LabError, OSError) as exc:
        print(f"loadfleet-lab: error: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _restart(state_dir: Path, names: list[str]) -> int:
    try:
        restarted = restart_lab(state_dir, names)
    except UnknownServers as exc:
        print(f"loadfleet-lab: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for r in restarted:
        old, new = " ".join(map(str, r.old_pids)), " ".join(map(str, r.new_pids))
        print(f"restarted {r.name}: {r.url} ({r.kind}, pid {old} -> {new}, {r.seconds:.1f} s)")
    return EXIT_OK


def _up(spec: LabSpec, state_dir: Path, spec_path: Path) -> int:
    lab = Lab(spec, state_dir)
    if any(e["alive"] for e in lab.status()) or lab.state().get("network"):
        print(f"loadfleet-lab: error: a lab is already up in {state_dir} (loadfleet-lab down first)", file=sys.stderr)
        return EXIT_FAILED
    keep_spec(spec_path, state_dir)
    lab.up()
    for entry in lab.status():
        where = f" on {entry['host']}" if entry.get("host") else ""
        print(f"{entry['name']}: {entry['url']} ({entry['kind']}{where}, pid {' '.join(map(str, entry['pids']))})")
    print(f"workload manifest: {lab.manifest}")
    state = lab.state()
    if state.get("network"):
        hosts = ", ".join(f"{h['name']} {h['address']}" for h in state["network"]["hosts"])
        print(f"network: {state['network']['subnet']} (unreachable from this namespace: guard route); hosts: {hosts}")
    controller = state.get("controller") or {}
    if controller.get("host"):
        print(
            f"controller: {controller['address']} on {controller['host']}; run plans with: loadfleet-lab exec "
            f"--state-dir {state_dir} {controller['host']} -- loadfleet run PLAN"
        )
    return EXIT_OK


def _status(lab: Lab) -> None:
    entries, state = lab.status(), lab.state()
    for e in entries:
        print(
            f"{e['name']:<10} {e.get('kind', 'nginx'):<10} {e.get('host', ''):<8} {e['url']:<28} pid {e['pid']:<8} "
            f"{'up' if e['alive'] else 'DOWN'}"
        )
    if not entries and not state:
        print("no lab in this state directory")
    network = state.get("network")
    if network:
        present = set(list_namespaces(network["prefix"]))
        missing = [n for n in network["namespaces"] if n not in present]
        guard = "guard route present" if guard_present(ipaddress.IPv4Network(network["subnet"])) else "NO GUARD ROUTE"
        print(
            f"network {network['subnet']}: {len(network['namespaces']) - len(missing)} of "
            f"{len(network['namespaces'])} namespaces, {guard}"
        )
        for host in network["hosts"]:
            print(f"  host {host['name']:<8} {host['address']:<15} netns {host['netns']}")
    for stats in lab.nfs_client_stats().values():
        print(
            f"  nfs client {stats.client}: {stats.read_ops} reads ({stats.read_bytes} bytes), "
            f"{stats.write_ops} writes ({stats.write_bytes} bytes), {stats.errors} errors"
        )


def _workload_from_args(args: argparse.Namespace) -> WorkloadSpec:
    """The `tree` options, validated like a spec's workload (each problem names its option)."""
    fields = {k: getattr(args, k) for k in ("scale", "seed", "bytes", "count") if getattr(args, k) is not None}
    try:
        workload: dict[str, Any] = {"kind": args.kind, **fields}
        return parse_spec({"workload": workload, "servers": [{"listen": "127.0.0.1:0"}]}).workload
    except SpecError as exc:
        raise SpecError([p.replace("workload.", "--") for p in exc.problems]) from None


if __name__ == "__main__":
    sys.exit(main())
