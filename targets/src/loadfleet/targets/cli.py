"""loadfleet-lab: bring a local web cluster up or down.

Exit codes: 0 done, 1 a server could not be started or stopped, 2 bad usage or spec.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .daemon import LabError
from .lab import Lab, LabSpec, SpecError, load_spec
from .spec import parse_spec
from .workload import DEFAULT_FILE_COUNT, DEFAULT_SINGLE_BYTES, WORKLOAD_KINDS, WorkloadSpec, generate

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadfleet-lab",
        description="Start and stop local web clusters (real nginx, Apache, Tomcat, Yaws, PHP-FPM, MariaDB, HAProxy and Varnish "
                    "on loopback addresses) serving a generated workload, for loadfleet demos and tests.",
        epilog="example: loadfleet-lab up targets/specs/quickstart.yaml --state-dir build/lab && "
               "loadfleet-lab down --state-dir build/lab")
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
    for name, text in (("down", "stop the servers of a state directory"),
                       ("status", "list the servers of a state directory")):
        sub.add_parser(name, help=text)
    for p in (sub.choices[name] for name in ("up", "down", "status")):
        p.add_argument("--state-dir", type=Path, required=True,
                       help="where configs, logs, PIDs and the docroot live")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "up":
            return _up(load_spec(args.spec), args.state_dir)
        if args.command == "tree":
            manifest = generate(args.docroot, _workload_from_args(args))
            print(f"{len(manifest.files)} files, {manifest.total_bytes} bytes; manifest: {args.docroot / 'manifest.json'}")
            return EXIT_OK
        lab = Lab(LabSpec(WorkloadSpec(), ()), args.state_dir)
        if args.command == "down":
            stopped = lab.down()
            print(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")
        else:
            entries = lab.status()
            for e in entries:
                print(f"{e['name']:<10} {e.get('kind', 'nginx'):<8} {e['url']:<28} pid {e['pid']:<8} "
                      f"{'up' if e['alive'] else 'DOWN'}")
            if not entries:
                print("no lab in this state directory")
            for stats in lab.nfs_client_stats().values():
                print(f"  nfs client {stats.client}: {stats.read_ops} reads ({stats.read_bytes} bytes), "
                      f"{stats.write_ops} writes ({stats.write_bytes} bytes), {stats.errors} errors")
        return EXIT_OK
    except SpecError as exc:
        for problem in exc.problems:
            print(f"loadfleet-lab: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except (LabError, OSError) as exc:
        print(f"loadfleet-lab: error: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _up(spec: LabSpec, state_dir: Path) -> int:
    lab = Lab(spec, state_dir)
    if any(e["alive"] for e in lab.status()):
        print(f"loadfleet-lab: error: a lab is already running in {state_dir} (loadfleet-lab down first)",
              file=sys.stderr)
        return EXIT_FAILED
    lab.up()
    for server in lab.servers:
        print(f"{server.name}: {server.url} ({server.kind}, pid {' '.join(map(str, server.pids))})")
    print(f"workload manifest: {lab.manifest}")
    return EXIT_OK


def _workload_from_args(args) -> WorkloadSpec:
    """The `tree` options, validated like a spec's workload (each problem names its option)."""
    fields = {k: getattr(args, k) for k in ("scale", "seed", "bytes", "count") if getattr(args, k) is not None}
    try:
        return parse_spec({"workload": {"kind": args.kind, **fields},
                           "servers": [{"listen": "127.0.0.1:0"}]}).workload
    except SpecError as exc:
        raise SpecError([p.replace("workload.", "--") for p in exc.problems]) from None


if __name__ == "__main__":
    sys.exit(main())
