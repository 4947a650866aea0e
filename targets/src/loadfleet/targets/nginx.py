"""A real nginx, configured and run by the lab: its own config, pid file, logs and
temp directories under a state directory, listening on one loopback address, and
stopped by PID."""
from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
# $bytes_sent lets a test compare the bytes a load driver counted with what nginx sent.
LOG_FORMAT = '$remote_addr "$request" $status $bytes_sent'


class LabError(Exception):
    """A lab part could not be started, stopped or configured; the message says why."""


def check_loopback(host: str) -> None:
    """Load goes only to loopback: the lab refuses to listen anywhere else."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"'{host}' is not an IP address") from None
    if not address.is_loopback:
        raise ValueError(f"'{host}' is not a loopback address (127.0.0.0/8 or ::1)")


def nginx_program() -> str:
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if not found:
        raise LabError("nginx is not installed (apt-get install nginx-light)")
    return found


class NginxServer:
    def __init__(self, host: str, port: int, docroot: Path, state_dir: Path, name: str, *, workers: int = 1):
        check_loopback(host)
        self.host, self.port, self.name, self.workers = host, port, name, workers
        self.docroot = Path(docroot).resolve()
        self.dir = Path(state_dir).resolve() / name
        self.pid: int | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def access_log(self) -> Path:
        return self.dir / "access.log"

    @property
    def error_log(self) -> Path:
        return self.dir / "error.log"

    def config(self) -> str:
        listen = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        user = "user root;\n" if os.geteuid() == 0 else ""
        temp = self.dir / "tmp"
        return f"""{user}daemon off;
master_process on;
worker_processes {self.workers};
pid {self.dir / 'nginx.pid'};
error_log {self.error_log} warn;
events {{ worker_connections 4096; }}
http {{
    default_type application/octet-stream;
    log_format loadfleet '{LOG_FORMAT}';
    access_log {self.access_log} loadfleet;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    server {{
        listen {listen};
        root {self.docroot};
    }}
}}
"""

    def start(self) -> None:
        (self.dir / "tmp").mkdir(parents=True, exist_ok=True)
        conf = self.dir / "nginx.conf"
        conf.write_text(self.config())
        for log in (self.access_log, self.error_log):
            log.write_text("")
        proc = subprocess.Popen([nginx_program(), "-c", str(conf), "-p", str(self.dir)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        self.pid = proc.pid
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LabError(f"nginx {self.name} exited at start: {self.error_tail()}")
            try:
                socket.create_connection((self.host, self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise LabError(f"nginx {self.name} did not listen on {self.url} within {START_TIMEOUT_S:g} s: {self.error_tail()}")

    def stop(self) -> None:
        if self.pid is not None:
            stop_pid(self.pid)
            self.pid = None

    def access_log_lines(self) -> int:
        with self.access_log.open("rb") as f:
            return sum(1 for _ in f)

    def bytes_sent(self) -> int:
        """Sum of $bytes_sent over the access log."""
        with self.access_log.open() as f:
            return sum(int(line.rsplit(" ", 1)[1]) for line in f if line.strip())

    def error_tail(self) -> str:
        try:
            return " | ".join(self.error_log.read_text().strip().splitlines()[-3:]) or "(error log empty)"
        except OSError:
            return "(no error log)"


def stop_pid(pid: int) -> None:
    """SIGTERM (nginx's fast shutdown), then SIGKILL for the whole group if it lingers."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        # Reap it if it is our child; otherwise just probe.
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
