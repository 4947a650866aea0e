"""A real nginx, configured and run by the lab: its own config, pid file, logs and
temp directories under a state directory, listening on one loopback address, and
stopped by PID."""

from __future__ import annotations

import os
from pathlib import Path

from .daemon import (
    LOCAL,
    LabError,
    LabServer,
    Launcher,
    check_loopback,
    find_program,
    host_port,
    log_tail,
    pid_alive,
    stop_pid,
)
from .pki import lab_pki
from .profiles import (
    DEFAULT_PROFILE,
    NGINX_STOCK_EVENTS,
    NGINX_STOCK_HTTP,
    NGINX_STOCK_INDEX,
    NGINX_STOCK_LOCATION,
    NGINX_STOCK_MAIN,
    Profile,
    directives,
)
from .tls import self_signed_cert

# $bytes_sent lets a test compare the bytes a load driver counted with what nginx sent.
LOG_FORMAT = '$remote_addr "$request" $status $bytes_sent $msec'  # $msec: when it was logged, s.ms
# An mTLS server's tls.log: the protocol, "r" for a resumed session ("." not), the SNI sent and the
# client certificate's verification (SUCCESS, NONE, FAILED:reason), then the status.
TLS_LOG_FORMAT = "$ssl_protocol $ssl_session_reused $ssl_server_name $ssl_client_verify $status"
# Older names, kept for importers of this module.
_alive = pid_alive


def nginx_program() -> str:
    return find_program("nginx", "nginx-light")


class NginxServer(LabServer):
    """nginx serving `docroot`; `extra_conf` goes into its server block (e.g. a fastcgi location).
    `tls`: https on the port, with a self-signed certificate made at start (`cert.pem`, `key.pem`).
    `http2`: HTTP/2 on the port: with `tls`, h2 by ALPN (and HTTP/1.1 for clients that do not offer
    h2); without, h2c by prior knowledge only (nginx then answers no HTTP/1.1 on the port). The
    access log's "$request" shows the version each request came in (HTTP/2.0).
    `mtls`: https whose clients must show a certificate of the lab's own CA (pki.py, made at
    start in the server's directory: `ca.pem`, `client.pem`, `client-key.pem` for a plan's
    `tls`); each request's TLS facts go to `tls.log` (TLS_LOG_FORMAT), beside the access log.
    `profile`: `lab` (the lab's tuning, `workers` worker processes) or `stock` (Debian's
    nginx.conf and default site, profiles.py; `workers` does not apply)."""

    kind = "nginx"

    def __init__(
        self,
        host: str,
        port: int,
        docroot: Path,
        state_dir: Path,
        name: str,
        *,
        workers: int = 1,
        extra_conf: str = "",
        tls: bool = False,
        mtls: bool = False,
        http2: bool = False,
        profile: str = DEFAULT_PROFILE,
        launcher: Launcher = LOCAL,
    ):
        super().__init__(host, port, state_dir, name, launcher=launcher)
        self.workers, self.extra_conf, self.tls, self.profile = workers, extra_conf, tls or mtls, Profile(profile)
        self.mtls = mtls
        self.http2 = http2
        self.scheme = "https" if self.tls else "http"
        self.docroot = Path(docroot).resolve()

    @property
    def access_log(self) -> Path:
        return self.dir / "access.log"

    @property
    def error_log(self) -> Path:
        return self.dir / "error.log"

    def config(self) -> str:
        listen = host_port(self.host, self.port) + (" ssl" if self.tls else "") + (" http2" if self.http2 else "")
        user = "user root;\n" if os.geteuid() == 0 else ""
        temp = self.dir / "tmp"
        if self.profile is Profile.STOCK:
            main, events, http = (
                directives(NGINX_STOCK_MAIN),
                directives(NGINX_STOCK_EVENTS, " "),
                directives(NGINX_STOCK_HTTP, "    "),
            )
            site = f"        index {NGINX_STOCK_INDEX};\n        location / {{ {NGINX_STOCK_LOCATION} }}\n"
        else:
            main, events, site = f"worker_processes {self.workers};\n", " worker_connections 4096;\n", ""
            http = (
                "    default_type application/octet-stream;\n    sendfile on;\n    tcp_nopush on;\n"
                "    keepalive_timeout 65;\n    keepalive_requests 100000;\n"
            )
        return f"""{user}daemon off;
master_process on;
{main}pid {self.dir / "nginx.pid"};
error_log {self.error_log} warn;
events {{
{events}}}
http {{
{http}    log_format loadfleet '{LOG_FORMAT}';
    log_format tls '{TLS_LOG_FORMAT}';
    access_log {self.access_log} loadfleet;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    server {{
        listen {listen};
        root {self.docroot};
{site}{self._tls_conf() if self.tls else ""}{self.extra_conf}    }}
}}
"""

    def _tls_conf(self) -> str:
        # A shared session cache: clients that reconnect resume instead of a full handshake.
        return (
            f"        ssl_certificate {self.dir / 'cert.pem'};\n"
            f"        ssl_certificate_key {self.dir / 'key.pem'};\n"
            "        ssl_protocols TLSv1.2 TLSv1.3;\n"
            "        ssl_session_cache shared:loadfleet:1m;\n"
        ) + (self._mtls_conf() if self.mtls else "")

    def _mtls_conf(self) -> str:
        return (
            f"        ssl_client_certificate {self.dir / 'ca.pem'};\n"
            "        ssl_verify_client on;\n"
            f"        access_log {self.tls_log} tls;\n"
            f"        access_log {self.access_log} loadfleet;\n"  # a server-level access_log replaces http's
        )

    @property
    def tls_log(self) -> Path:
        """One line per request: TLS_LOG_FORMAT (mtls only)."""
        return self.dir / "tls.log"

    def start(self) -> None:
        (self.dir / "tmp").mkdir(parents=True, exist_ok=True)
        if self.mtls:
            lab_pki(self.dir, self.host)
            self.tls_log.write_text("")
        elif self.tls:
            self_signed_cert(self.dir, self.host)
        conf = self.dir / "nginx.conf"
        conf.write_text(self.config())
        for log in (self.access_log, self.error_log):
            log.write_text("")
        proc = self.start_listening([nginx_program(), "-c", str(conf), "-p", str(self.dir)], what=f"nginx {self.name}")
        self.pid = proc.pid

    def bytes_sent(self) -> int:
        """Sum of $bytes_sent over the access log."""
        with self.access_log.open() as f:
            return sum(int(line.rsplit(" ", 2)[1]) for line in f if line.strip())

    def error_tail(self) -> str:
        return log_tail(self.error_log)


__all__ = ["LOG_FORMAT", "LabError", "NginxServer", "check_loopback", "nginx_program", "stop_pid"]
