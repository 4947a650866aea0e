"""A dynamic PHP page: a PHP-FPM pool with its own config and socket under the state
directory, behind an nginx (`fastcgi_pass`) or Apache (`proxy_fcgi`) front that also serves
the workload tree.

`/page.php?cost=N` fills a template and runs N rounds of SHA-256 first, so its cost per
request is set by the client (or by the spec's default `cost`) and a few clients saturate the
CPU. The page shows the final digest: sha256 applied N times to "loadfleet", hex, each round
hashing the previous round's hex string, so a test can check the body exactly.

With a `database` (a lab `MariaDbServer`), the database-backed pages of `dbpages.py` are
served beside it.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from .apache import DEFAULT_MPM, ApacheServer
from .daemon import (
    LOCAL,
    LabError,
    Launcher,
    check_readable_by,
    find_program,
    log_tail,
    stop_pid,
    unprivileged_user,
    wait_for_path,
)
from .dbpages import DB_PAGES, write_db_pages
from .mariadb import MariaDbServer
from .nginx import NginxServer
from .profiles import DEFAULT_PROFILE, PHP_FPM_STOCK_POOL, Profile

FRONTS = ("nginx", "apache")
DEFAULT_FRONT = "nginx"
DEFAULT_COST = 1000
MAX_COST = 1_000_000
# 0: `Cache-Control: no-store` (every request reaches PHP); above: `public, max-age=N`, so a
# cache in front (Varnish) keeps the page for N seconds, as study 001's Varnish did.
DEFAULT_MAX_AGE_S = 0
MAX_MAX_AGE_S = 86_400
PAGE = "/page.php"
DIGEST_SEED = "loadfleet"
TEMPLATE_ROWS = 10

_TEMPLATE = """<!DOCTYPE html>
<html><head><title>loadfleet dynamic page</title></head>
<body>
<h1>cost {{cost}}</h1>
<p id="digest">{{digest}}</p>
<table>
{{rows}}</table>
</body></html>
"""

_PAGE = """<?php
// Filled per request: `cost` rounds of SHA-256 (CPU work), then a template.
$cost = isset($_GET['cost']) ? $_GET['cost'] : '%(default_cost)d';
if (!ctype_digit((string)$cost) || (int)$cost > %(max_cost)d) {
    http_response_code(400);
    echo "cost must be an integer from 0 to %(max_cost)d\\n";
    exit;
}
$cost = (int)$cost;
$digest = '%(seed)s';
for ($i = 0; $i < $cost; $i++) {
    $digest = hash('sha256', $digest);
}
$rows = '';
for ($i = 0; $i < %(rows)d; $i++) {
    $rows .= '<tr><td>' . $i . '</td><td>' . substr($digest, $i * 6, 6) . "</td></tr>\\n";
}
header('Cache-Control: %(cache_control)s');
echo strtr(file_get_contents(__DIR__ . '/template.html'),
           ['{{cost}}' => $cost, '{{digest}}' => $digest, '{{rows}}' => $rows]);
"""


def fpm_program() -> str:
    for name in ("php-fpm", "php-fpm8.2"):
        try:
            return find_program(name, "php-fpm")
        except LabError:
            continue
    raise LabError("php-fpm is not installed (apt-get install php-fpm)")


class FpmPool:
    """One PHP-FPM master with one static pool listening on a Unix socket."""

    def __init__(
        self, directory: Path, name: str, *, workers: int, launcher: Launcher = LOCAL, profile: str = DEFAULT_PROFILE
    ):
        """`profile`: `lab` (a static pool of `workers` children) or `stock` (Debian's www.conf pool
        settings, profiles.PHP_FPM_STOCK_POOL; `workers` does not apply)."""
        self.dir, self.name, self.workers, self.launcher = directory, name, workers, launcher
        self.profile = Profile(profile)
        self.pid: int | None = None

    @property
    def socket(self) -> Path:
        return self.dir / "php-fpm.sock"

    @property
    def access_log(self) -> Path:
        return self.dir / "php-fpm-access.log"

    @property
    def error_log(self) -> Path:
        return self.dir / "php-fpm.log"

    def config(self) -> str:
        root = os.geteuid() == 0
        user = pwd.getpwuid(os.geteuid()).pw_name
        # As root the pool runs as root too (php-fpm -R), so it reads any state directory.
        identity = f"user = {user}\ngroup = {user}\n" if root else ""
        return f"""[global]
pid = {self.dir / "php-fpm.pid"}
error_log = {self.error_log}
daemonize = no

[{self.name}]
{identity}listen = {self.socket}
listen.mode = 0666
listen.backlog = 4096
{self._pm()}access.log = {self.access_log}
access.format = "%R \\"%m %r%Q%q\\" %s"
"""

    def _pm(self) -> str:
        if self.profile is Profile.STOCK:
            return "".join(f"{k} = {v}\n" for k, v in PHP_FPM_STOCK_POOL.items())
        return f"pm = static\npm.max_children = {self.workers}\n"

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        conf = self.dir / "php-fpm.conf"
        conf.write_text(self.config())
        for log in (self.access_log, self.error_log):
            log.write_text("")
        # Through the launcher: in a lab host's namespace, the pages reach a database on another host.
        proc = self.launcher.spawn(
            [fpm_program(), "--nodaemonize", "--fpm-config", str(conf), "--allow-to-run-as-root"],
            log=self.dir / "php-fpm-stderr.log",
        )
        self.pid = proc.pid
        wait_for_path(proc, self.socket, what=f"php-fpm {self.name}", error_tail=lambda: log_tail(self.error_log))

    def stop(self) -> None:
        if self.pid is not None:
            stop_pid(self.pid)
            self.pid = None

    def requests(self) -> int:
        """Requests PHP-FPM handled (lines of its access log)."""
        with self.access_log.open("rb") as f:
            return sum(1 for _ in f)


def _check_settings(*, front: str, cost: int, max_age_s: int) -> None:
    """Raises ValueError for a front, page cost or max age PhpServer does not take."""
    if front not in FRONTS:
        raise ValueError(f"front '{front}' is not one of {', '.join(FRONTS)}")
    if not 0 <= cost <= MAX_COST:
        raise ValueError(f"cost {cost} must be from 0 to {MAX_COST}")
    if not 0 <= max_age_s <= MAX_MAX_AGE_S:
        raise ValueError(f"max_age_s {max_age_s} must be from 0 to {MAX_MAX_AGE_S}")


class FpmFronted:
    """A web front (nginx or Apache) before a PHP-FPM pool, as a lab reads and stops the pair:
    the front's address and log, both PIDs, the front stopped first."""

    front: NginxServer | ApacheServer
    pool: FpmPool

    host = property(lambda self: self.front.host)
    port = property(lambda self: self.front.port)
    pid = property(lambda self: self.front.pid)
    access_log = property(lambda self: self.front.access_log)

    @property
    def url(self) -> str:
        return self.front.url

    @property
    def pids(self) -> list[int]:
        """PHP-FPM first: stopping goes in reverse, front first."""
        return [p for p in (self.pool.pid, self.front.pid) if p]

    def stop(self) -> None:
        """Stops the front, then PHP-FPM, by PID; safe to call twice."""
        self.front.stop()
        self.pool.stop()

    def access_log_lines(self) -> int:
        return self.front.access_log_lines()

    def error_tail(self) -> str:
        return f"{self.front.error_tail()} | php-fpm: {log_tail(self.pool.error_log)}"


class PhpServer(FpmFronted):
    """nginx or Apache on a loopback address: the workload tree, plus /page.php from PHP-FPM
    (and the database pages, given a `database`)."""

    kind = "php"

    def __init__(
        self,
        host: str,
        port: int,
        docroot: Path,
        state_dir: Path,
        name: str,
        *,
        front: str = DEFAULT_FRONT,
        mpm: str = DEFAULT_MPM,
        workers: int | None = None,
        cost: int = DEFAULT_COST,
        database: MariaDbServer | None = None,
        max_age_s: int = DEFAULT_MAX_AGE_S,
        profile: str = DEFAULT_PROFILE,
        launcher: Launcher = LOCAL,
    ):
        _check_settings(front=front, cost=cost, max_age_s=max_age_s)
        self.name, self.front_kind, self.cost, self.database = name, front, cost, database
        self.max_age_s = max_age_s
        self.pages = (PAGE, *(DB_PAGES if database else ()))
        self.dir = Path(state_dir).resolve() / name
        self.app = self.dir / "app"
        self.pool = FpmPool(self.dir, name, workers=workers or os.cpu_count() or 2, launcher=launcher, profile=profile)
        self.front: NginxServer | ApacheServer
        if front == "nginx":
            self.front = NginxServer(
                host,
                port,
                docroot,
                state_dir,
                name,
                extra_conf=self._nginx_location(),
                profile=profile,
                launcher=launcher,
            )
        else:
            self.front = ApacheServer(
                host,
                port,
                docroot,
                state_dir,
                name,
                mpm=mpm,
                modules=("proxy", "proxy_fcgi"),
                extra_conf=self._apache_location(),
                profile=profile,
                launcher=launcher,
            )

    @property
    def page_url(self) -> str:
        return self.url + PAGE

    def start(self) -> None:
        self.app.mkdir(parents=True, exist_ok=True)
        (self.app / "template.html").write_text(_TEMPLATE)
        cache_control = f"public, max-age={self.max_age_s}" if self.max_age_s else "no-store"
        (self.app / "page.php").write_text(
            _PAGE
            % {
                "default_cost": self.cost,
                "max_cost": MAX_COST,
                "seed": DIGEST_SEED,
                "rows": TEMPLATE_ROWS,
                "cache_control": cache_control,
            }
        )
        if self.database:
            write_db_pages(self.app, self.database)
        self.pool.start()
        try:
            if self.front_kind == "apache" and os.geteuid() == 0:
                # Apache's children connect to the PHP-FPM socket in this directory.
                check_readable_by(self.dir, unprivileged_user()[0], what=f"php {self.name}")
            self.front.start()
        except BaseException:
            self.stop()
            raise

    def _pages_regex(self) -> str:
        """Only the pages this server has go to PHP-FPM (db.php, for one, is not a page)."""
        names = "|".join(page.strip("/").removesuffix(".php") for page in self.pages)
        return rf"^/({names})\.php$"

    def _nginx_location(self) -> str:
        params = {
            "SCRIPT_FILENAME": f"{self.app}$fastcgi_script_name",
            "SCRIPT_NAME": "$fastcgi_script_name",
            "QUERY_STRING": "$query_string",
            "REQUEST_METHOD": "$request_method",
            "CONTENT_TYPE": "$content_type",
            "CONTENT_LENGTH": "$content_length",
            "REQUEST_URI": "$request_uri",
            "SERVER_PROTOCOL": "$server_protocol",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "REMOTE_ADDR": "$remote_addr",
            "SERVER_NAME": "$server_name",
            "SERVER_PORT": "$server_port",
        }
        lines = "".join(f"            fastcgi_param {k} {v};\n" for k, v in params.items())
        return (
            f"        location ~ {self._pages_regex()} {{\n"
            f"            fastcgi_pass unix:{self.pool.socket};\n{lines}        }}\n"
        )

    def _apache_location(self) -> str:
        return f'ProxyPassMatch "{self._pages_regex()}" "unix:{self.pool.socket}|fcgi://localhost{self.app}/$1.php"\n'
