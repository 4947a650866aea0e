"""Stock-configuration profiles (loadfleet.targets.profiles): the values are the distribution's own,
compared here with the files its packages installed, and the generated configs are valid for the
real programs (`nginx -t`, `apache2 -t`)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from loadfleet.targets.apache import MPMS, ApacheServer, apache_program
from loadfleet.targets.daemon import unprivileged_user
from loadfleet.targets.nginx import NginxServer, nginx_program
from loadfleet.targets.php import PhpServer
from loadfleet.targets.profiles import (
    APACHE_MODS,
    APACHE_STOCK_CORE,
    APACHE_STOCK_MODULES,
    APACHE_STOCK_MPM,
    APACHE_STOCK_SECURITY,
    NGINX_STOCK_EVENTS,
    NGINX_STOCK_HTTP,
    NGINX_STOCK_MAIN,
    PHP_FPM_POOL_CONF,
    PHP_FPM_STOCK_POOL,
)
from loadfleet.targets.spec import SpecError, parse_spec

DEBIAN_NGINX_CONF = Path("/etc/nginx/nginx.conf")
DEBIAN_APACHE_CONF = Path("/etc/apache2/apache2.conf")
DEBIAN_SECURITY_CONF = Path("/etc/apache2/conf-available/security.conf")
DEBIAN_MODS_ENABLED = Path("/etc/apache2/mods-enabled")


def directives_of(path: Path, *, terminator: str = "") -> dict[str, list[str]]:
    """Active (uncommented) `name value` lines of a config file, by name; nginx's end in ';'."""
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("<") or line in ("{", "}") or line.endswith("{"):
            continue
        name, _, value = line.partition(" ") if " " in line else line.partition("\t")
        found.setdefault(name.strip(), []).append(value.strip().removesuffix(terminator).strip())
    return found


def need(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} is not installed (the distribution's file the profile is compared with)")


def test_nginx_stock_values_are_debians_nginx_conf():
    need(DEBIAN_NGINX_CONF)
    installed = directives_of(DEBIAN_NGINX_CONF, terminator=";")
    for name, value in {**NGINX_STOCK_MAIN, **NGINX_STOCK_EVENTS, **NGINX_STOCK_HTTP}.items():
        assert value in installed.get(name, []), (name, value, installed.get(name))
    # Debian 12's file sets neither: nginx's built-in 75 s and 1,000 requests apply, as in the profile.
    assert "keepalive_timeout" not in installed and "keepalive_requests" not in installed


@pytest.mark.parametrize("mpm", MPMS)
def test_apache_stock_mpm_limits_are_debians_mpm_conf(mpm):
    conf = APACHE_MODS / f"mpm_{mpm}.conf"
    need(conf)
    installed = {k: v[-1] for k, v in directives_of(conf).items()}
    assert installed == APACHE_STOCK_MPM[mpm]
    assert APACHE_STOCK_MPM[mpm]["MaxRequestWorkers"] == "150"  # not 256: that is the compiled-in limit


def test_apache_stock_core_settings_are_debians_apache2_conf_and_security_conf():
    need(DEBIAN_APACHE_CONF)
    need(DEBIAN_SECURITY_CONF)
    core, security = directives_of(DEBIAN_APACHE_CONF), directives_of(DEBIAN_SECURITY_CONF)
    for name, value in APACHE_STOCK_CORE.items():
        assert core.get(name, [None])[-1] == value, (name, core.get(name))
    for name, value in APACHE_STOCK_SECURITY.items():
        assert security.get(name, [None])[-1] == value, (name, security.get(name))


def test_apache_stock_modules_are_what_a_fresh_install_enables():
    need(DEBIAN_MODS_ENABLED)
    enabled = {p.stem for p in DEBIAN_MODS_ENABLED.glob("*.load")} - {f"mpm_{m}" for m in MPMS}
    assert enabled == set(APACHE_STOCK_MODULES), "the machine's apache2 has other modules enabled than a fresh install"


def test_nginx_stock_config_is_debians_and_valid(tmp_path):
    server = NginxServer("127.0.0.2", 18099, tmp_path, tmp_path, "web", profile="stock")
    conf = server.config()
    assert "worker_processes auto;" in conf and "worker_connections 768;" in conf and "gzip on;" in conf
    assert "keepalive" not in conf  # nginx's built-in keep-alive, as Debian's file leaves it
    assert "try_files $uri $uri/ =404;" in conf
    lab = NginxServer("127.0.0.2", 18099, tmp_path, tmp_path, "lab", workers=2).config()
    assert "worker_processes 2;" in lab and "keepalive_requests 100000;" in lab
    check_nginx(server, conf)


def check_nginx(server: NginxServer, conf: str) -> None:
    (server.dir / "tmp").mkdir(parents=True, exist_ok=True)
    path = server.dir / "nginx.conf"
    path.write_text(conf)
    result = subprocess.run(
        [nginx_program(), "-t", "-c", str(path), "-p", str(server.dir)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("mpm", MPMS)
def test_apache_stock_config_includes_debians_files_and_is_valid(open_dir, mpm):
    server = ApacheServer("127.0.0.2", 18099, open_dir, open_dir, f"a-{mpm}", mpm=mpm, profile="stock")
    user, group = unprivileged_user() if os.geteuid() == 0 else (None, None)
    conf = server.config(user, group)
    assert f"Include {APACHE_MODS / f'mpm_{mpm}.conf'}\n" in conf  # MaxRequestWorkers 150 and the rest
    assert {"mpm_event", "mpm_worker", "mpm_prefork"} - {f"mpm_{mpm}"} & set(re.findall(r"mpm_\w+", conf)) == set()
    for name in APACHE_STOCK_MODULES:
        assert f"Include {APACHE_MODS / f'{name}.load'}\n" in conf
    assert "KeepAlive On\nMaxKeepAliveRequests 100\nKeepAliveTimeout 5\n" in conf and "Timeout 300\n" in conf
    lab = ApacheServer("127.0.0.2", 18099, open_dir, open_dir, "lab", mpm=mpm).config(user, group)
    assert "MaxKeepAliveRequests 0" in lab and "Include" not in lab
    server.dir.mkdir(parents=True, exist_ok=True)
    path = server.dir / "httpd.conf"
    path.write_text(conf)
    result = subprocess.run([apache_program(), "-t", "-f", str(path)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_a_php_server_passes_its_profile_to_its_front(tmp_path):
    for front, marker in (("nginx", "worker_connections 768;"), ("apache", "MaxKeepAliveRequests 100")):
        php = PhpServer("127.0.0.2", 18099, tmp_path, tmp_path, f"p-{front}", front=front, profile="stock")
        conf = php.front.config() if front == "nginx" else php.front.config(None, None)
        assert marker in conf and "page" in conf


@pytest.mark.parametrize(
    "server, problem",
    [
        ({"kind": "nginx", "profile": "stock", "workers": 2}, "worker_processes auto"),
        ({"kind": "nginx", "profile": "tuned"}, "profile"),
        ({"kind": "haproxy", "profile": "stock", "backends": ["x"]}, "profile: not a field of kind 'haproxy'"),
        ({"kind": "php", "mpm": "prefork"}, "mpm: only for front: apache"),
        ({"kind": "php", "front": "apache", "mpm": "threaded"}, "mpm"),
    ],
)
def test_bad_profiles_are_named_by_field(server, problem):
    with pytest.raises(SpecError) as caught:
        parse_spec(
            {
                "servers": [
                    {"name": "x", "kind": "nginx", "listen": "127.0.0.2:0"},
                    {"name": "s", "listen": "127.0.0.3:0", **server},
                ]
            }
        )
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_php_fpm_stock_pool_is_debians_www_conf(tmp_path):
    need(PHP_FPM_POOL_CONF)
    installed = {k: v[-1] for k, v in directives_of(PHP_FPM_POOL_CONF).items()}
    for name, value in PHP_FPM_STOCK_POOL.items():
        assert installed.get(name) == f"= {value}", (name, installed.get(name))
    stock = PhpServer("127.0.0.2", 18099, tmp_path, tmp_path, "p", profile="stock").pool.config()
    assert "pm = dynamic\npm.max_children = 5\n" in stock
    lab = PhpServer("127.0.0.2", 18099, tmp_path, tmp_path, "q", workers=3).pool.config()
    assert "pm = static\npm.max_children = 3\n" in lab


def test_a_stock_php_server_takes_no_workers():
    with pytest.raises(SpecError, match="PHP-FPM pool"):
        parse_spec({"servers": [{"kind": "php", "profile": "stock", "workers": 4, "listen": "127.0.0.2:0"}]})


def test_nginx_http2_listens_h2_over_tls_and_h2c_in_clear(tmp_path):
    """`http2=True`: the listen line gains http2 (nginx 1.22's way), after ssl when there is TLS."""
    h2 = NginxServer("127.0.0.2", 18443, tmp_path, tmp_path, "h2", tls=True, http2=True).config()
    h2c = NginxServer("127.0.0.2", 18080, tmp_path, tmp_path, "h2c", http2=True).config()
    plain = NginxServer("127.0.0.2", 18081, tmp_path, tmp_path, "h1").config()
    assert "listen 127.0.0.2:18443 ssl http2;" in h2
    assert "listen 127.0.0.2:18080 http2;" in h2c
    assert "listen 127.0.0.2:18081;" in plain
