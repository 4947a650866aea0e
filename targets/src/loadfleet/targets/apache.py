"""A real Apache httpd with an MPM of choice, run by the lab from its own minimal config
(not Debian's /etc/apache2 layout): modules loaded from /usr/lib/apache2/modules, its own
PidFile, ErrorLog and CustomLog under the state directory, one loopback address."""

from __future__ import annotations

import os
from pathlib import Path

from .daemon import LOCAL, LabServer, Launcher, check_readable_by, find_program, host_port, log_tail, unprivileged_user
from .profiles import DEFAULT_PROFILE, Profile, apache_stock_modules, apache_stock_settings

MPMS = ("prefork", "worker", "event")
DEFAULT_MPM = "event"
MODULES_DIR = Path("/usr/lib/apache2/modules")
BASE_MODULES = ("authz_core", "mime", "dir")
# The same fields as nginx's access log: client, request line, status, bytes sent (%O, mod_logio).
LOG_FORMAT = r"%a \"%r\" %>s %O"


def apache_program() -> str:
    return find_program("apache2", "apache2")


class ApacheServer(LabServer):
    """Apache serving `docroot`. `modules` and `extra_conf` add to the config (e.g. proxy_fcgi).
    `profile`: `lab` (three modules, the MPM's compiled-in limits) or `stock` (Debian's default
    modules, apache2.conf's settings and mpm_<mpm>.conf's limits, profiles.py)."""

    kind = "apache"

    def __init__(
        self,
        host: str,
        port: int,
        docroot: Path,
        state_dir: Path,
        name: str,
        *,
        mpm: str = DEFAULT_MPM,
        modules: tuple[str, ...] = (),
        extra_conf: str = "",
        profile: str = DEFAULT_PROFILE,
        also_listen: tuple[str, ...] = (),
        launcher: Launcher = LOCAL,
    ):
        super().__init__(host, port, state_dir, name, launcher=launcher)
        self.also_listen = also_listen  # more addresses, at the same port (spec.py)
        if mpm not in MPMS:
            raise ValueError(f"mpm '{mpm}' is not one of {', '.join(MPMS)}")
        self.mpm, self.modules, self.extra_conf, self.profile = mpm, modules, extra_conf, Profile(profile)
        self.docroot = Path(docroot).resolve()

    @property
    def access_log(self) -> Path:
        return self.dir / "access.log"

    @property
    def error_log(self) -> Path:
        return self.dir / "error.log"

    def config(self, user: str | None, group: str | None) -> str:
        if self.profile is Profile.STOCK:
            return self._stock_config(user, group)
        modules = "".join(
            f"LoadModule {m}_module {MODULES_DIR / f'mod_{m}.so'}\n"
            for m in (f"mpm_{self.mpm}", *BASE_MODULES, *self.modules)
        )
        # Apache refuses to serve as root: its children run as an unprivileged user.
        identity = f"User {user}\nGroup {group}\n" if user else ""
        return f"""ServerRoot {self.dir}
DefaultRuntimeDir {self.dir}
{modules}ServerName {self.host}
{self.listen_lines}
{identity}PidFile {self.pid_file}
ErrorLog {self.error_log}
LogLevel warn
LogFormat "{LOG_FORMAT}" loadfleet
CustomLog {self.access_log} loadfleet
TypesConfig /etc/mime.types
KeepAlive On
MaxKeepAliveRequests 0
DocumentRoot {self.docroot}
DirectoryIndex index.html
<Directory />
    Require all denied
</Directory>
<Directory {self.docroot}>
    Require all granted
</Directory>
{self.extra_conf}"""

    def _stock_config(self, user: str | None, group: str | None) -> str:
        """Debian's apache2.conf, its default modules and site, with the lab's address and files."""
        identity = f"User {user}\nGroup {group}\n" if user else ""
        return f"""ServerRoot {self.dir}
DefaultRuntimeDir {self.dir}
{apache_stock_modules(self.mpm, self.modules)}{apache_stock_settings()}ServerName {self.host}
{self.listen_lines}
{identity}PidFile {self.pid_file}
ErrorLog {self.error_log}
LogLevel warn
LogFormat "{LOG_FORMAT}" loadfleet
CustomLog {self.access_log} loadfleet
AccessFileName .htaccess
<FilesMatch "^\\.ht">
    Require all denied
</FilesMatch>
<Directory />
    Options FollowSymLinks
    AllowOverride None
    Require all denied
</Directory>
DocumentRoot {self.docroot}
<Directory {self.docroot}>
    Options Indexes FollowSymLinks
    AllowOverride None
    Require all granted
</Directory>
{self.extra_conf}"""

    @property
    def listen_lines(self) -> str:
        return "\n".join(f"Listen {host_port(host, self.port)}" for host in (self.host, *self.also_listen))

    @property
    def pid_file(self) -> Path:
        return self.dir / "httpd.pid"

    def start(self) -> None:
        user = group = None
        if os.geteuid() == 0:
            user, group = unprivileged_user()
            check_readable_by(self.docroot, user, what=f"apache {self.name}")
        self.dir.mkdir(parents=True, exist_ok=True)
        conf = self.dir / "httpd.conf"
        conf.write_text(self.config(user, group))
        for log in (self.access_log, self.error_log):
            log.write_text("")
        # The lab stops a server before it starts one here; a PID file left behind names a process
        # that is dead, or a zombie not yet reaped, which httpd would take for itself "already running".
        self.pid_file.unlink(missing_ok=True)
        proc = self.start_listening(
            [apache_program(), "-f", str(conf), "-DFOREGROUND"], what=f"apache {self.name}", log=self.dir / "stderr.log"
        )
        self.pid = proc.pid

    def error_tail(self) -> str:
        tail = log_tail(self.error_log)
        return tail if tail != "(log empty)" else log_tail(self.dir / "stderr.log")
