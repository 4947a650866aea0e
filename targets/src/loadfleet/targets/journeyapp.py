"""The journeys lab app (issue 30): a small PHP shop on PHP-FPM behind nginx, on the lab's
MariaDB, for plans with cookies, values carried from one response to the next, and checks.

    GET  /login.php     a form with a hidden `csrf` token kept in the PHP session (PHPSESSID)
    POST /login.php     user, password, csrf: a wrong or missing token is 403 "bad token", a
                        wrong password 401, else a 302 to /account.php, the session logged in
    GET  /account.php   logged in: 200 "Welcome, userN" and data-cart-items="<rows in the cart>";
                        else a 302 to /login.php
    POST /cart.php      item=N (1..MAX_ITEM), logged in: one row (user, item) added to `cart`,
                        {"items": <rows in the cart>}; else 401

Accounts user0..user<users-1> with password pw<N> are seeded at every start (the database
`journey`, dropped and made again, so rows of an earlier run are gone). `cart_rows()` reads the
rows per user as the administrator, for tests that compare the server's side with a run.

The PHP sources live beside this module (`journeyweb/`); a start copies them into the app's
state directory with a written `config.php`, sessions go to a directory of the state (emptied at
start), and nginx hands only the three pages to PHP-FPM: everything else is a 404 from an empty
docroot. One journey app per MariaDB server (both use the database `journey`).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from .daemon import LOCAL, Launcher
from .mariadb import MariaDbServer
from .nginx import NginxServer
from .php import FpmFronted, FpmPool

DEFAULT_USERS = 1000
MAX_USERS = 100_000  # a start seeds every account: 100,000 rows take MariaDB a few seconds
DEFAULT_WORKERS = 4
MAX_WORKERS = 256  # as the lab's other PHP pools (spec.MAX_WORKERS)
MAX_ITEM = 1000  # cart.php takes item=1..MAX_ITEM
LOGIN_PAGE, ACCOUNT_PAGE, CART_PAGE = "/login.php", "/account.php", "/cart.php"
PAGES = (LOGIN_PAGE, ACCOUNT_PAGE, CART_PAGE)
DATABASE = "journey"
# The pages' account: loopback only, SELECT on the accounts and SELECT/INSERT on the cart.
APP_USER, APP_PASSWORD = "journey", "journey"
INSERT_BATCH = 1000
WEB_SOURCES = Path(__file__).with_name("journeyweb")
WEB_FILES = ("journey.php", "login.php", "account.php", "cart.php")
# What nginx passes to PHP-FPM (request headers, the cookie among them, go as HTTP_*).
FASTCGI_PARAMS = (
    ("SCRIPT_NAME", "$fastcgi_script_name"),
    ("QUERY_STRING", "$query_string"),
    ("REQUEST_METHOD", "$request_method"),
    ("CONTENT_TYPE", "$content_type"),
    ("CONTENT_LENGTH", "$content_length"),
    ("REQUEST_URI", "$request_uri"),
    ("SERVER_PROTOCOL", "$server_protocol"),
    ("GATEWAY_INTERFACE", "CGI/1.1"),
    ("REMOTE_ADDR", "$remote_addr"),
    ("SERVER_NAME", "$server_name"),
    ("SERVER_PORT", "$server_port"),
)


def user_name(n: int) -> str:
    return f"user{n}"


def user_password(n: int) -> str:
    return f"pw{n}"


class JourneyApp(FpmFronted):
    """nginx + a PHP-FPM pool serving the journey pages from `database` (a running lab
    MariaDbServer), listening on HOST:PORT."""

    kind = "journey"

    def __init__(
        self,
        host: str,
        port: int,
        state_dir: Path,
        name: str,
        *,
        database: MariaDbServer,
        workers: int = DEFAULT_WORKERS,
        users: int = DEFAULT_USERS,
        launcher: Launcher = LOCAL,
    ):
        if not 1 <= workers <= MAX_WORKERS:
            raise ValueError(f"workers {workers} must be from 1 to {MAX_WORKERS}")
        if not 1 <= users <= MAX_USERS:
            raise ValueError(f"users {users} must be from 1 to {MAX_USERS}")
        self.name, self.database, self.users = name, database, users
        self.dir = Path(state_dir).resolve() / name
        self.pool = FpmPool(self.dir, name, workers=workers, launcher=launcher)
        self.front = NginxServer(
            host, port, self.dir / "public", state_dir, name, extra_conf=self._nginx_locations(), launcher=launcher
        )

    @property
    def app_dir(self) -> Path:
        return self.dir / "app"

    @property
    def session_dir(self) -> Path:
        return self.dir / "sessions"

    def start(self) -> None:
        for directory in (self.app_dir, self.session_dir):
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
        (self.dir / "public").mkdir(exist_ok=True)
        for name in WEB_FILES:
            shutil.copyfile(WEB_SOURCES / name, self.app_dir / name)
        (self.app_dir / "config.php").write_text(self._config_php())
        self.database.query(seed_sql(self.users), database=None)
        self.pool.start()
        try:
            self.front.start()
        except BaseException:
            self.stop()
            raise

    def cart_rows(self) -> dict[str, int]:
        return cart_rows(self.database)

    def _config_php(self) -> str:
        host = self.database.host
        values = {
            "JR_DB_HOST": _php_string(f"[{host}]" if ":" in host else host),
            "JR_DB_PORT": str(self.database.port),
            "JR_DB_USER": _php_string(APP_USER),
            "JR_DB_PASSWORD": _php_string(APP_PASSWORD),
            "JR_DB_NAME": _php_string(DATABASE),
            "JR_SESSION_DIR": _php_string(str(self.session_dir)),
            "JR_MAX_ITEM": str(MAX_ITEM),
        }
        lines = "".join(f"const {name} = {value};\n" for name, value in values.items())
        return f"<?php\n// Written by journeyapp.py at every start.\n{lines}"

    def _nginx_locations(self) -> str:
        pages = "|".join(page.strip("/").removesuffix(".php") for page in PAGES)
        params = [("SCRIPT_FILENAME", f"{self.app_dir}$fastcgi_script_name"), *FASTCGI_PARAMS]
        lines = "".join(f"            fastcgi_param {k} {v};\n" for k, v in params)
        return (
            "        location = / { return 302 /login.php; }\n"
            f"        location ~ ^/({pages})\\.php$ {{\n"
            f"            fastcgi_pass unix:{self.pool.socket};\n{lines}        }}\n"
        )


def cart_rows(database: MariaDbServer) -> dict[str, int]:
    """Rows of `cart` per account name (accounts without rows left out), read as the
    administrator over the database's socket."""
    rows = database.query(
        "SELECT u.name, COUNT(*) FROM cart c JOIN users u ON u.id = c.user_id GROUP BY u.name", database=DATABASE
    )
    return {name: int(count) for name, count in rows}


def seed_sql(users: int) -> str:
    """The app's database from scratch: accounts user0..user<users-1> (password pw<N>, salted
    SHA-256 with a salt derived from N, so every start seeds the same rows), an empty cart, and
    the pages' account with only the rights the pages use."""
    lines = [
        f"DROP DATABASE IF EXISTS {DATABASE};",
        f"CREATE DATABASE {DATABASE};",
        f"USE {DATABASE};",
        "CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR(32) NOT NULL UNIQUE,"
        " salt CHAR(16) NOT NULL, password_sha256 CHAR(64) NOT NULL) ENGINE=InnoDB;",
        "CREATE TABLE cart (id BIGINT AUTO_INCREMENT PRIMARY KEY, user_id INT NOT NULL, item INT NOT NULL,"
        " added_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),"
        " KEY (user_id), FOREIGN KEY (user_id) REFERENCES users (id)) ENGINE=InnoDB;",
        f"CREATE OR REPLACE USER '{APP_USER}'@'%' IDENTIFIED BY '{APP_PASSWORD}';",
        f"GRANT SELECT ON {DATABASE}.users TO '{APP_USER}'@'%';",
        f"GRANT SELECT, INSERT ON {DATABASE}.cart TO '{APP_USER}'@'%';",
    ]
    rows = [_account_row(n) for n in range(users)]
    lines += [
        f"INSERT INTO users (id, name, salt, password_sha256) VALUES {', '.join(rows[i : i + INSERT_BATCH])};"
        for i in range(0, len(rows), INSERT_BATCH)
    ]
    return "\n".join(lines) + "\n"


def _account_row(n: int) -> str:
    salt = hashlib.sha256(f"journey-salt-{n}".encode()).hexdigest()[:16]
    digest = hashlib.sha256((salt + user_password(n)).encode()).hexdigest()
    return f"({n}, '{user_name(n)}', '{salt}', '{digest}')"


def _php_string(value: str) -> str:
    """A single-quoted PHP literal: only \\ and ' are special there."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


__all__ = [
    "ACCOUNT_PAGE",
    "CART_PAGE",
    "DEFAULT_USERS",
    "LOGIN_PAGE",
    "MAX_ITEM",
    "MAX_USERS",
    "JourneyApp",
    "cart_rows",
    "seed_sql",
    "user_name",
    "user_password",
]

if __name__ == "__main__":
    from .journeylab import main

    raise SystemExit(main())
