"""The journeys lab: its spec (targets/specs/journey.yaml), bringing its MariaDB and its app
(journeyapp.py) up and down, and its command line:

    python -m loadfleet.targets.journeyapp up targets/specs/journey.yaml --state-dir build/journey-lab
    python -m loadfleet.targets.journeyapp rows --state-dir build/journey-lab   # cart rows per user
    python -m loadfleet.targets.journeyapp down --state-dir build/journey-lab

The spec is a lab spec (lab.md) with one `mariadb` server and one server of kind `journey`
(fields `database`, `workers`, `users`); the database is checked by the lab's own rules.
`up` records the PIDs, URL and database in `journey.json` in the state directory, so that `down`
and `rows` from another process find them.

Exit codes: 0 done, 1 a server could not be started or stopped, 2 bad usage or spec.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .daemon import LabError, free_port, pid_alive, stop_pid
from .journeyapp import DEFAULT_USERS, DEFAULT_WORKERS, MAX_USERS, MAX_WORKERS, JourneyApp, cart_rows
from .mariadb import MariaDbServer
from .spec import ServerSpec, SpecError, parse_spec, read_spec_doc

STATE_FILE = "journey.json"
APP_FIELDS = ("name", "kind", "listen", "database", "workers", "users")
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class AppSpec:
    name: str
    host: str
    port: int  # 0: any free port
    database: str
    workers: int = DEFAULT_WORKERS
    users: int = DEFAULT_USERS


@dataclass(frozen=True)
class JourneySpec:
    app: AppSpec
    database: ServerSpec


def load_journey_spec(path: Path) -> JourneySpec:
    return parse_journey_spec(read_spec_doc(path))


def parse_journey_spec(doc: object) -> JourneySpec:
    """Every problem at once, each naming its field (`servers[1].users: ...`)."""
    entries = doc.get("servers") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not isinstance(entries, list):
        raise SpecError(["servers: a journey lab spec lists its mariadb and journey servers"])
    apps = [i for i, e in enumerate(entries) if isinstance(e, dict) and e.get("kind") == "journey"]
    if len(apps) != 1:
        raise SpecError([f"servers: a journey lab has exactly one server of kind journey, not {len(apps)}"])
    index, entry = apps[0], entries[apps[0]]
    # The lab's rules check the app's name and listen address in place (so every problem keeps
    # its index, and two servers on one address are caught); the lab does not know the kind.
    stand_in = {k: entry[k] for k in ("name", "listen") if k in entry}
    problems: list[str] = []
    try:
        servers = {
            s.name: s
            for s in parse_spec({**doc, "servers": [*entries[:index], stand_in, *entries[index + 1 :]]}).servers
        }
    except SpecError as exc:
        problems += exc.problems
        servers = {}
    where = f"servers[{index}]"
    problems += _app_problems(where, entry)
    name = entry.get("database")
    database = servers.get(name) if isinstance(name, str) else None
    if servers and (database is None or database.kind != "mariadb"):
        problems.append(f"{where}.database: {name!r} must name the spec's mariadb server")
    if servers and len(servers) != 2:
        problems.append("servers: a journey lab has its mariadb and its journey server, nothing else")
    if problems or database is None:
        raise SpecError(problems)
    app = servers[entry.get("name", f"web{index + 1}")]
    workers, users = entry.get("workers", DEFAULT_WORKERS), entry.get("users", DEFAULT_USERS)
    return JourneySpec(AppSpec(app.name, app.host, app.port, database.name, workers=workers, users=users), database)


def _app_problems(where: str, entry: dict[str, Any]) -> list[str]:
    """The journey server's own fields: only its own, and its bounds."""
    problems = [
        f"{where}.{k}: not a field of kind journey ({', '.join(APP_FIELDS)})" for k in entry if k not in APP_FIELDS
    ]
    for field, default, top in (("workers", DEFAULT_WORKERS, MAX_WORKERS), ("users", DEFAULT_USERS, MAX_USERS)):
        value = entry.get(field, default)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
            problems.append(f"{where}.{field}: {value!r} must be an integer from 1 to {top}")
    return problems


class JourneyLab:
    """Context manager: the database and the app are up inside `with`, and stopped even on errors."""

    def __init__(self, spec: JourneySpec, state_dir: Path):
        self.spec, self.state_dir = spec, Path(state_dir).resolve()
        db = spec.database
        self.database = MariaDbServer(
            db.host,
            db.port or free_port(db.host),
            self.state_dir,
            db.name,
            seed=db.seed,
            items=db.items,
            categories=db.categories,
        )
        a = spec.app
        self.app = JourneyApp(
            a.host,
            a.port or free_port(a.host),
            self.state_dir,
            a.name,
            database=self.database,
            workers=a.workers,
            users=a.users,
        )

    def __enter__(self) -> JourneyLab:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.database.start()
        try:
            self.app.start()
        except BaseException:
            self.database.stop()
            raise
        state = {
            "url": self.app.url,
            "pids": self.database.pids + self.app.pids,
            "database": {"name": self.database.name, "host": self.database.host, "port": self.database.port},
        }
        (self.state_dir / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")

    def down(self) -> None:
        self.app.stop()
        self.database.stop()
        (self.state_dir / STATE_FILE).unlink(missing_ok=True)


def _read_state(state_dir: Path) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads((state_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return state


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loadfleet.targets.journeyapp",
        description="Start and stop the journeys lab app (PHP-FPM behind nginx, on a private MariaDB, on loopback).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the database and the app; prints the app's URL")
    up.add_argument("spec", type=Path, help="e.g. targets/specs/journey.yaml")
    sub.add_parser("down", help="stop what `up` started (by the recorded PIDs)")
    sub.add_parser("rows", help="print the cart's rows per user: NAME COUNT lines")
    for p in sub.choices.values():
        p.add_argument("--state-dir", type=Path, required=True, help="where configs, logs, data and PIDs live")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    state = _read_state(args.state_dir)
    try:
        if args.command == "up":
            return _up(load_journey_spec(args.spec), args.state_dir, state)
        if args.command == "rows":
            return _rows(state, args.state_dir)
        return _down(state, args.state_dir)
    except SpecError as exc:
        for problem in exc.problems:
            print(f"journey lab: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except (LabError, OSError, ValueError) as exc:
        print(f"journey lab: error: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _up(spec: JourneySpec, state_dir: Path, state: dict[str, Any]) -> int:
    if state and any(pid_alive(p) for p in state["pids"]):
        print(f"journey lab: error: a journey lab is already up in {state_dir} (down first)", file=sys.stderr)
        return EXIT_FAILED
    lab = JourneyLab(spec, state_dir)
    lab.up()
    print(f"{spec.app.name}: {lab.app.url} (journey, {spec.app.users} accounts user0..user{spec.app.users - 1})")
    print(f"{spec.database.name}: {lab.database.url} (mariadb, socket {lab.database.socket})")
    return EXIT_OK


def _rows(state: dict[str, Any], state_dir: Path) -> int:
    if not state:
        print(f"journey lab: error: no journey lab in {state_dir}", file=sys.stderr)
        return EXIT_FAILED
    db = state["database"]
    for name, count in sorted(cart_rows(MariaDbServer(db["host"], db["port"], state_dir, db["name"])).items()):
        print(name, count)
    return EXIT_OK


def _down(state: dict[str, Any], state_dir: Path) -> int:
    if not state:
        print(f"no journey lab in {state_dir}")
        return EXIT_OK
    for pid in reversed(state["pids"]):
        stop_pid(pid)
    (state_dir / STATE_FILE).unlink()
    print(f"stopped the journey lab at {state['url']}")
    return EXIT_OK


__all__ = ["AppSpec", "JourneyLab", "JourneySpec", "load_journey_spec", "main", "parse_journey_spec"]

if __name__ == "__main__":
    sys.exit(main())
