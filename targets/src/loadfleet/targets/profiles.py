"""Configuration profiles of the lab's web servers.

- `lab` (the default): the lab's own tuning for load tests — nginx with `workers` worker
  processes (default 1), 4,096 connections each and unlimited keep-alive requests; Apache with
  three modules and its compiled-in MPM limits (prefork: at most 256 children).
- `stock`: the distribution's own defaults (for a PHP server also PHP-FPM's pool: `pm = dynamic`,
  at most 5 children), as the classic comparisons ran their servers ("the
  default configuration of each server, unchanged", study 000; "all in their default
  configuration", study 002). The values are Debian 12's, from the files its packages ship;
  `tests/targets/test_profiles.py` compares them with the installed files, so a Debian update
  that changes them fails a test rather than drifting silently.

Only the lab's own bookkeeping stays in a stock server's config: its address, pid file, error
and access logs (the lab's one-line format, so requests can be counted), the docroot, and the
user it runs as. Apache's stock modules and MPM limits are included from the distribution's own
files in /etc/apache2/mods-available, not copied.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path


class Profile(StrEnum):
    LAB = "lab"
    STOCK = "stock"


PROFILES = tuple(p.value for p in Profile)
DEFAULT_PROFILE = Profile.LAB.value

# Debian 12 (nginx 1.22.1) /etc/nginx/nginx.conf. It sets no keepalive_timeout or
# keepalive_requests, so nginx's built-in 75 s and 1,000 requests apply.
NGINX_STOCK_MAIN = {"worker_processes": "auto"}
NGINX_STOCK_EVENTS = {"worker_connections": "768"}
NGINX_STOCK_HTTP = {
    "sendfile": "on",
    "tcp_nopush": "on",
    "types_hash_max_size": "2048",
    "include": "/etc/nginx/mime.types",
    "default_type": "application/octet-stream",
    "gzip": "on",
}
# Debian's default site (/etc/nginx/sites-available/default).
NGINX_STOCK_INDEX = "index.html index.htm index.nginx-debian.html"
NGINX_STOCK_LOCATION = "try_files $uri $uri/ =404;"

APACHE_MODS = Path("/etc/apache2/mods-available")
# What apache2's postinst enables on a fresh install (enable_default_modules), with the two
# modules a2enmod pulls in as dependencies (authn_core, authz_core); the MPM is the server's.
APACHE_STOCK_MODULES = (
    "access_compat",
    "alias",
    "auth_basic",
    "authn_core",
    "authn_file",
    "authz_core",
    "authz_host",
    "authz_user",
    "autoindex",
    "deflate",
    "dir",
    "env",
    "filter",
    "mime",
    "negotiation",
    "reqtimeout",
    "setenvif",
    "status",
)
# /etc/apache2/apache2.conf's server-wide settings, and security.conf's (conf-enabled by default).
APACHE_STOCK_CORE = {
    "Timeout": "300",
    "KeepAlive": "On",
    "MaxKeepAliveRequests": "100",
    "KeepAliveTimeout": "5",
    "HostnameLookups": "Off",
}
APACHE_STOCK_SECURITY = {"ServerTokens": "OS", "ServerSignature": "On", "TraceEnable": "Off"}
# The MPM limits of /etc/apache2/mods-available/mpm_<mpm>.conf, which a stock server includes;
# kept here for the docs and the tests that compare them with the file.
APACHE_STOCK_MPM = {
    "prefork": {
        "StartServers": "5",
        "MinSpareServers": "5",
        "MaxSpareServers": "10",
        "MaxRequestWorkers": "150",
        "MaxConnectionsPerChild": "0",
    },
    "worker": {
        "StartServers": "2",
        "MinSpareThreads": "25",
        "MaxSpareThreads": "75",
        "ThreadLimit": "64",
        "ThreadsPerChild": "25",
        "MaxRequestWorkers": "150",
        "MaxConnectionsPerChild": "0",
    },
    "event": {
        "StartServers": "2",
        "MinSpareThreads": "25",
        "MaxSpareThreads": "75",
        "ThreadLimit": "64",
        "ThreadsPerChild": "25",
        "MaxRequestWorkers": "150",
        "MaxConnectionsPerChild": "0",
    },
}

# Debian 12 (PHP 8.2) /etc/php/8.2/fpm/pool.d/www.conf: a dynamic pool of at most 5 children.
PHP_FPM_POOL_CONF = Path("/etc/php/8.2/fpm/pool.d/www.conf")
PHP_FPM_STOCK_POOL = {
    "pm": "dynamic",
    "pm.max_children": "5",
    "pm.start_servers": "2",
    "pm.min_spare_servers": "1",
    "pm.max_spare_servers": "3",
}


def directives(values: dict[str, str], indent: str = "") -> str:
    """`name value;` lines (nginx) for a dict of directives."""
    return "".join(f"{indent}{name} {value};\n" for name, value in values.items())


def apache_stock_modules(mpm: str, extra: tuple[str, ...] = ()) -> str:
    """Debian's own LoadModule lines and module settings: each module's .load, then every
    .conf there is, in a2enmod's (alphabetical) order, as apache2.conf includes mods-enabled."""
    names = sorted({f"mpm_{mpm}", *APACHE_STOCK_MODULES})
    loads = "".join(f"Include {APACHE_MODS / f'{m}.load'}\n" for m in names)
    # Modules the lab adds (e.g. proxy_fcgi for PHP-FPM), as `a2enmod` would.
    loads += "".join(f"Include {APACHE_MODS / f'{m}.load'}\n" for m in extra if m not in names)
    confs = "".join(f"Include {APACHE_MODS / f'{m}.conf'}\n" for m in names if (APACHE_MODS / f"{m}.conf").exists())
    return loads + confs


def apache_stock_settings() -> str:
    return "".join(f"{k} {v}\n" for k, v in {**APACHE_STOCK_CORE, **APACHE_STOCK_SECURITY}.items())


__all__ = [
    "APACHE_STOCK_CORE",
    "APACHE_STOCK_MODULES",
    "APACHE_STOCK_MPM",
    "DEFAULT_PROFILE",
    "NGINX_STOCK_EVENTS",
    "NGINX_STOCK_HTTP",
    "NGINX_STOCK_MAIN",
    "PHP_FPM_STOCK_POOL",
    "PROFILES",
    "Profile",
]
