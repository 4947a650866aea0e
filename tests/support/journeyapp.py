"""The journeys lab app (PHP on MariaDB behind nginx, loadfleet.targets.journeylab) as the
end-to-end tests of journeys, feeds and the Gatling driver start it: one database, one app."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from loadfleet.targets.journeylab import JourneyLab, parse_journey_spec


@contextmanager
def journey_app(state_dir: Path, *, users: int, db_address: str, app_address: str) -> Iterator[JourneyLab]:
    """The app with `users` accounts (user0..), its database on `db_address` and its pages on
    `app_address` (loopback addresses; ports picked free); stopped by PID on the way out."""
    spec = {
        "workload": {"kind": "single"},
        "servers": [
            {"name": "db", "kind": "mariadb", "items": 1, "categories": 1, "listen": f"{db_address}:0"},
            {
                "name": "app",
                "kind": "journey",
                "database": "db",
                "workers": 2,
                "users": users,
                "listen": f"{app_address}:0",
            },
        ],
    }
    with JourneyLab(parse_journey_spec(spec), state_dir) as running:
        yield running
