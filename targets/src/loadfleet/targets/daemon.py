"""What every lab server shares: where it may listen and run (a `Launcher`: the root namespace
on loopback, or a lab network host), finding a Debian program, starting a process in its own
session and waiting until it listens, and stopping it by PID.

Errors: `LabError` (a part could not be started, stopped or configured; the message says
why and carries the tail of the program's own log).
"""

from __future__ import annotations

import contextlib
import grp
import ipaddress
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


class LabError(Exception):
    """A lab part could not be started, stopped or configured; the message says why."""


@dataclass(frozen=True)
class Upstream:
    """A server a load balancer forwards to."""

    name: str
    host: str
    port: int


def check_loopback(host: str) -> None:
    """Load goes only to loopback: the lab refuses to listen anywhere else."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"'{host}' is not an IP address") from None
    if not address.is_loopback:
        raise ValueError(f"'{host}' is not a loopback address (127.0.0.0/8 or ::1)")


class Launcher(Protocol):
    """Where a lab server runs: `LocalLauncher` (the root namespace, loopback addresses only) or
    a lab network host (`netns.Host`, its own address inside a namespace the lab created)."""

    def check_address(self, host: str) -> None:
        """Raises ValueError unless a server started here may listen on `host`."""

    def check_peer(self, host: str) -> None:
        """Raises ValueError unless a server started here may forward to `host` (a balancer's
        backend): loopback from loopback, the same lab network from a lab host."""

    def spawn(self, argv: list[str], *, log: Path | None = None) -> subprocess.Popen[bytes]:
        """Starts a program here, in its own session."""

    def start_listening(
        self,
        argv: list[str],
        host: str,
        port: int,
        *,
        what: str,
        error_tail: Callable[[], str],
        log: Path | None = None,
        timeout_s: float = START_TIMEOUT_S,
    ) -> subprocess.Popen[bytes]:
        """Starts a server here and returns once it listens on HOST:PORT (refused if taken)."""


@dataclass(frozen=True)
class LocalLauncher:
    """The root namespace: servers listen on loopback only. `confine` runs in each child before
    it execs (e.g. a CPU cap, caps.py), so the program and all it forks start confined."""

    confine: Callable[[], None] | None = None

    def check_address(self, host: str) -> None:
        check_loopback(host)

    def check_peer(self, host: str) -> None:
        check_loopback(host)

    def spawn(self, argv: list[str], *, log: Path | None = None) -> subprocess.Popen[bytes]:
        return spawn(argv, log=log, preexec=self.confine)

    def start_listening(
        self,
        argv: list[str],
        host: str,
        port: int,
        *,
        what: str,
        error_tail: Callable[[], str],
        log: Path | None = None,
        timeout_s: float = START_TIMEOUT_S,
    ) -> subprocess.Popen[bytes]:
        # The port must be free first: otherwise whoever holds it would answer, and the start
        # would look fine.
        check_port_free(host, port, what=what)
        proc = self.spawn(argv, log=log)
        wait_listening(proc, host, port, what=what, error_tail=error_tail, timeout_s=timeout_s)
        return proc


LOCAL = LocalLauncher()


class LabServer:
    """What every lab server has: an address its launcher allows (loopback, or its lab host's),
    a directory of its own under the lab's state directory (config, logs, pid file), and the
    PID it runs under."""

    kind = ""
    scheme = "http"  # https for a server with a TLS listener

    def __init__(self, host: str, port: int, state_dir: Path, name: str, *, launcher: Launcher = LOCAL):
        launcher.check_address(host)
        self.host, self.port, self.name, self.launcher = host, port, name, launcher
        self.dir = Path(state_dir).resolve() / name
        self.pid: int | None = None

    @property
    def url(self) -> str:
        return http_url(self.host, self.port, self.scheme)

    @property
    def pids(self) -> list[int]:
        return [self.pid] if self.pid else []

    def stop(self) -> None:
        """Stops the server by PID; safe to call twice."""
        if self.pid is not None:
            stop_pid(self.pid)
            self.pid = None

    @property
    def access_log(self) -> Path:
        """Kinds that log each request override this (nginx, Apache, Tomcat, Yaws)."""
        raise LabError(f"{self.kind} server {self.name} keeps no access log")

    @property
    def access_logs(self) -> list[Path]:
        """Every access log of the server: its `access_log`, unless it keeps one per address (Yaws)."""
        return [self.access_log]

    def access_log_lines(self) -> int:
        """Requests the server logged, for kinds with an `access_log` (one line per request)."""
        total = 0
        for log in self.access_logs:
            with log.open("rb") as f:
                total += sum(1 for _ in f)
        return total

    def start_listening(
        self, argv: list[str], *, what: str, log: Path | None = None, timeout_s: float = START_TIMEOUT_S
    ) -> subprocess.Popen[bytes]:
        """Starts `argv` through the launcher; returns once it listens on the server's address."""
        return self.launcher.start_listening(
            argv, self.host, self.port, what=what, error_tail=self.error_tail, log=log, timeout_s=timeout_s
        )

    def error_tail(self) -> str:
        return "(no log)"


# The name before servers could run in lab network namespaces.
LoopbackServer = LabServer


def check_upstreams(launcher: Launcher, upstreams: list[Upstream], *, what: str) -> None:
    """A balancer forwards only where its launcher allows: loopback backends for one on loopback,
    backends on the same lab network for one on a lab host; anything else is refused."""
    if not upstreams:
        raise ValueError(f"{what} needs at least one backend")
    for upstream in upstreams:
        try:
            launcher.check_peer(upstream.host)
        except ValueError as exc:
            raise ValueError(f"{what} backend {upstream.name}: {exc}") from None


def http_url(host: str, port: int, scheme: str = "http") -> str:
    return f"{scheme}://{host_port(host, port)}"


def host_port(host: str, port: int) -> str:
    """HOST:PORT as nginx, Apache, HAProxy and Varnish spell it ([::1]:80 for IPv6)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def find_program(name: str, package: str, *, extra_dirs: tuple[str, ...] = ("/usr/sbin",)) -> str:
    found = shutil.which(name) or next(
        (str(Path(d) / name) for d in extra_dirs if os.access(Path(d) / name, os.X_OK)), None
    )
    if not found:
        raise LabError(f"{name} is not installed (apt-get install {package})")
    return found


def spawn(
    argv: list[str], *, log: Path | None = None, preexec: Callable[[], None] | None = None
) -> subprocess.Popen[bytes]:
    """Starts a program in its own session (so a stop can take its whole group); `preexec` runs
    in the child just before exec (a CPU cap: every process the program forks inherits it)."""
    with open(log, "ab") if log else contextlib.nullcontext() as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL if out is None else out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,
        )


def spawn_listening(
    argv: list[str],
    host: str,
    port: int,
    *,
    what: str,
    error_tail: Callable[[], str],
    log: Path | None = None,
    timeout_s: float = START_TIMEOUT_S,
) -> subprocess.Popen[bytes]:
    """Starts a server on loopback and returns once it listens on HOST:PORT."""
    return LOCAL.start_listening(argv, host, port, what=what, error_tail=error_tail, log=log, timeout_s=timeout_s)


def free_port(host: str) -> int:
    """A port on HOST that nothing listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port_free(host: str, port: int, *, what: str) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is no obstacle
        try:
            s.bind((host, port))
        except OSError as exc:
            raise LabError(f"{what} cannot listen on {host_port(host, port)}: {exc.strerror}") from exc


def wait_listening(
    proc: subprocess.Popen[bytes],
    host: str,
    port: int,
    *,
    what: str,
    error_tail: Callable[[], str],
    timeout_s: float = START_TIMEOUT_S,
) -> None:
    """Returns once HOST:PORT accepts connections; otherwise stops `proc` and raises LabError."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError(f"{what} exited at start: {error_tail()}")
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    stop_pid(proc.pid)
    raise LabError(f"{what} did not listen on {host_port(host, port)} within {timeout_s:g} s: {error_tail()}")


def wait_for_path(
    proc: subprocess.Popen[bytes],
    path: Path,
    *,
    what: str,
    error_tail: Callable[[], str],
    timeout_s: float = START_TIMEOUT_S,
) -> None:
    """Returns once `path` (e.g. a Unix socket) exists; otherwise stops `proc` and raises LabError."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError(f"{what} exited at start: {error_tail()}")
        if path.exists():
            return
        time.sleep(0.05)
    stop_pid(proc.pid)
    raise LabError(f"{what} did not create {path} within {timeout_s:g} s: {error_tail()}")


def log_tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:]) or "(log empty)"
    except OSError:
        return f"(no log at {path})"


def unprivileged_user() -> tuple[str, str]:
    """(user, group) for servers that refuse to run as root (Apache): www-data, else nobody."""
    for user in ("www-data", "nobody"):
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            continue
        return user, grp.getgrgid(entry.pw_gid).gr_name
    raise LabError("no unprivileged user (www-data or nobody) to run Apache's children as")


def check_readable_by(path: Path, user: str, *, what: str) -> None:
    """Raises LabError if `user` cannot reach `path` (every parent directory searchable)."""
    entry = pwd.getpwnam(user)
    groups = {entry.pw_gid} | {g.gr_gid for g in grp.getgrall() if user in g.gr_mem}
    for directory in [*reversed(Path(path).resolve().parents), Path(path).resolve()]:
        st = directory.stat()
        if st.st_uid == entry.pw_uid:
            ok = st.st_mode & stat.S_IXUSR
        elif st.st_gid in groups:
            ok = st.st_mode & stat.S_IXGRP
        else:
            ok = st.st_mode & stat.S_IXOTH
        if not ok:
            raise LabError(
                f"{what}: user {user} cannot reach {path}: {directory} is mode "
                f"{stat.S_IMODE(st.st_mode):04o}; put the state directory where {user} can read it"
            )


def stop_pid(pid: int) -> None:
    """SIGTERM (a fast shutdown for nginx, Apache, HAProxy, Varnish and PHP-FPM), then
    SIGKILL for the whole process group if it lingers, and a wait until it is gone: a server
    holding thousands of connections can take seconds to go even then, and one started in its
    place would find it still there (study 003's Apache worker, stopped with 11,000 users)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if _gone_within(pid, STOP_TIMEOUT_S):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    # Not raised on if it outlives this too (a process in uninterruptible sleep): a stop goes on
    # to the lab's other servers, and a start in its place says what it found.
    _gone_within(pid, STOP_TIMEOUT_S)


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def pid_alive(pid: int) -> bool:
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
