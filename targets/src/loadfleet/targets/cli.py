"""loadfleet-lab: bring a local web cluster up or down.

Exit codes: 0 done, 1 a server could not be started or stopped, 2 bad usage or spec.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .lab import Lab, LabSpec, SpecError, load_spec
from .nginx import LabError
from .workload import generate_tree

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadfleet-lab",
        description="Start and stop local web clusters (real nginx on loopback addresses) serving a "
                    "generated workload tree, for loadfleet demos and tests.",
        epilog="example: loadfleet-lab up targets/specs/quickstart.yaml --state-dir build/lab && "
               "loadfleet-lab down --state-dir build/lab")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="generate the workload tree (if needed) and start the servers")
    up.add_argument("spec", type=Path, help="lab spec (YAML), e.g. targets/specs/quickstart.yaml")
    tree = sub.add_parser("tree", help="only generate the workload tree into a directory (e.g. a shared docroot)")
    tree.add_argument("docroot", type=Path)
    tree.add_argument("--scale", type=float, default=1.0, help="directories = 4 x scale (default 1.0, ~20 MB)")
    tree.add_argument("--seed", type=int, default=1, help="same seed, same bytes (default 1)")
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
            if args.scale <= 0:
                raise SpecError(["--scale must be above 0"])
            manifest = generate_tree(args.docroot, scale=args.scale, seed=args.seed)
            print(f"{len(manifest.files)} files, {manifest.total_bytes} bytes; manifest: {args.docroot / 'manifest.json'}")
            return EXIT_OK
        lab = Lab(LabSpec(1.0, 1, ()), args.state_dir)
        if args.command == "down":
            stopped = lab.down()
            print(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")
        else:
            entries = lab.status()
            for e in entries:
                print(f"{e['name']:<10} {e['url']:<28} pid {e['pid']:<8} {'up' if e['alive'] else 'DOWN'}")
            if not entries:
                print("no lab in this state directory")
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
        print(f"{server.name}: {server.url} (pid {server.pid})")
    print(f"workload manifest: {lab.manifest}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
