"""A private MariaDB server for the lab's database-backed PHP pages (`dbpages.py`): its own
datadir (made by `mariadb-install-db` at every start), Unix socket, pid file and error log
under the state directory, one loopback address and port, started and stopped by PID — never
the system service, never /var/lib/mysql.

Every start seeds the same rows from `seed` (Python's `random.Random(seed)`), so two runs of
a spec compare servers on identical data, and the update page's writes of an earlier run are
gone:

    categories(id, name)                                         `categories` rows, ids 1..N
    items(id, category_id, name, price_cents, stock, hits)       `items` rows, ids 1..N, hits 0

The pages connect over TCP as user `loadfleet` (SELECT and UPDATE on the database only);
`query()` runs SQL as the administrator over the socket, for seeding and for tests.
"""

from __future__ import annotations

import os
import pwd
import random
import shutil
import subprocess
from pathlib import Path

from .daemon import LOCAL, LabError, LabServer, Launcher, find_program, log_tail

DEFAULT_ITEMS = 5000
DEFAULT_CATEGORIES = 50
DEFAULT_SEED = 1
MAX_ROWS = 1_000_000
DATABASE = "loadfleet"
# The pages' account: loopback only and SELECT/UPDATE on the lab's data, so not a secret.
USER, PASSWORD = "loadfleet", "loadfleet"
START_TIMEOUT_S = 30.0  # InnoDB creates its files at the first start
SOCKET_PATH_MAX = 107  # sun_path: a longer socket path cannot be bound
INSERT_BATCH = 1000
WORDS = (
    "amber",
    "basalt",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "granite",
    "harbor",
    "indigo",
    "juniper",
    "kelp",
    "lumen",
    "meadow",
    "nickel",
    "onyx",
    "prairie",
    "quartz",
    "river",
    "sierra",
    "tundra",
)


def mariadb_program(name: str) -> str:
    return find_program(name, "mariadb-server", extra_dirs=("/usr/sbin", "/usr/bin"))


class MariaDbServer(LabServer):
    """mariadbd with a freshly seeded datadir, listening on HOST:PORT and on `socket`."""

    kind = "mariadb"
    scheme = "mysql"

    def __init__(
        self,
        host: str,
        port: int,
        state_dir: Path,
        name: str,
        *,
        seed: int = DEFAULT_SEED,
        items: int = DEFAULT_ITEMS,
        categories: int = DEFAULT_CATEGORIES,
        launcher: Launcher = LOCAL,
    ):
        super().__init__(host, port, state_dir, name, launcher=launcher)
        if not 1 <= categories <= items <= MAX_ROWS:
            raise ValueError(f"need 1 <= categories ({categories}) <= items ({items}) <= {MAX_ROWS}")
        self.seed, self.items, self.categories = seed, items, categories

    @property
    def datadir(self) -> Path:
        return self.dir / "data"

    @property
    def socket(self) -> Path:
        return self.dir / "mariadbd.sock"

    @property
    def error_log(self) -> Path:
        return self.dir / "error.log"

    def start(self) -> None:
        if len(str(self.socket)) > SOCKET_PATH_MAX:
            raise LabError(
                f"mariadb {self.name}: the socket path {self.socket} is longer than "
                f"{SOCKET_PATH_MAX} bytes; use a shorter state directory"
            )
        shutil.rmtree(self.datadir, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.error_log.write_text("")
        self._install()
        proc = self.start_listening(
            self.argv(), what=f"mariadb {self.name}", log=self.dir / "stderr.log", timeout_s=START_TIMEOUT_S
        )
        self.pid = proc.pid
        try:
            self.query(seed_sql(self.seed, items=self.items, categories=self.categories), database=None)
        except BaseException:
            self.stop()
            raise

    def argv(self) -> list[str]:
        return [
            mariadb_program("mariadbd"),
            "--no-defaults",
            f"--user={_user()}",
            f"--datadir={self.datadir}",
            f"--socket={self.socket}",
            f"--pid-file={self.dir / 'mariadbd.pid'}",
            f"--log-error={self.error_log}",
            f"--bind-address={self.host}",
            f"--port={self.port}",
            "--skip-name-resolve",
            # Each PHP-FPM child keeps a persistent connection; several pools can share a server.
            "--max-connections=1000",
            "--innodb-buffer-pool-size=64M",
        ]

    def _install(self) -> None:
        """A new system database; the invoking user becomes an administrator over the socket."""
        argv = [
            mariadb_program("mariadb-install-db"),
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--user={_user()}",
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
        ]
        log = self.dir / "install.log"
        with log.open("wb") as out:
            result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=120)
        if result.returncode != 0:
            raise LabError(f"mariadb {self.name}: mariadb-install-db failed: {log_tail(log)}")

    def query(self, sql: str, *, database: str | None = DATABASE) -> list[list[str]]:
        """Runs SQL as the administrator (over the socket); returns the rows as lists of strings."""
        argv = [
            mariadb_program("mariadb"),
            "--no-defaults",
            f"--socket={self.socket}",
            f"--user={_user()}",
            "--batch",
            "--skip-column-names",
            "--raw",
            *([database] if database else []),
        ]
        result = subprocess.run(argv, input=sql, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            # The client echoes the failed statement first; its last line is the error.
            error = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise LabError(f"mariadb {self.name}: {error[-500:]}")
        return [line.split("\t") for line in result.stdout.splitlines()]

    def error_tail(self) -> str:
        tail = log_tail(self.error_log)
        return tail if tail != "(log empty)" else log_tail(self.dir / "stderr.log")


def _user() -> str:
    """The effective user (not $USER, which sudo may leave behind): mariadbd runs as it, and
    it administers the server over the socket."""
    return pwd.getpwuid(os.geteuid()).pw_name


def seed_sql(seed: int, *, items: int, categories: int) -> str:
    """The schema, the pages' account and the rows: the same SQL for the same arguments."""
    rng = random.Random(seed)
    lines = [
        f"CREATE DATABASE {DATABASE};",
        f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}';",
        f"GRANT SELECT, UPDATE ON {DATABASE}.* TO '{USER}'@'%';",
        f"USE {DATABASE};",
        "CREATE TABLE categories (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL) ENGINE=InnoDB;",
        "CREATE TABLE items (id INT PRIMARY KEY, category_id INT NOT NULL, name VARCHAR(64) NOT NULL,"
        " price_cents INT NOT NULL, stock INT NOT NULL, hits INT NOT NULL DEFAULT 0,"
        " KEY (category_id), FOREIGN KEY (category_id) REFERENCES categories (id)) ENGINE=InnoDB;",
    ]
    lines += _inserts(
        "categories (id, name)", [f"({i}, '{rng.choice(WORDS)} {rng.choice(WORDS)}')" for i in range(1, categories + 1)]
    )
    # Every category gets items: ids cycle through the categories, the rest is random.
    lines += _inserts(
        "items (id, category_id, name, price_cents, stock)",
        [
            f"({i}, {(i - 1) % categories + 1}, '{rng.choice(WORDS)} {rng.choice(WORDS)} {i}', "
            f"{rng.randint(100, 100_000)}, {rng.randint(0, 1000)})"
            for i in range(1, items + 1)
        ],
    )
    return "\n".join(lines) + "\n"


def _inserts(table: str, rows: list[str]) -> list[str]:
    return [
        f"INSERT INTO {table} VALUES {', '.join(rows[i : i + INSERT_BATCH])};"
        for i in range(0, len(rows), INSERT_BATCH)
    ]


__all__ = ["DATABASE", "DEFAULT_CATEGORIES", "DEFAULT_ITEMS", "PASSWORD", "USER", "MariaDbServer", "seed_sql"]
