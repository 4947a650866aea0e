"""The server every bench run loads: one nginx worker pinned to core 0, serving fixed-size
files from a temporary docroot, tuned for many connections and with no access log (the log
would cost the server time, not the generator, but a quieter server is a steadier one)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil

from bench.limits import raise_fd_limit
from loadfleet.targets.nginx import NginxServer

HOST = "127.0.0.1"
SERVER_CORE = 0
# Enough for the 10,000-connection memory run, with room for connections in TIME_WAIT.
WORKER_CONNECTIONS = 20_000
LISTEN_BACKLOG = 4096


class BenchNginx(NginxServer):
    """NginxServer with the limits a 10k-connection run needs; those directives live outside
    the server block, where `extra_conf` cannot reach."""

    def config(self) -> str:
        conf = super().config()
        tuned = (
            conf.replace(" worker_connections 4096;\n", f" worker_connections {WORKER_CONNECTIONS};\n")
            .replace("events {\n", f"worker_rlimit_nofile {WORKER_CONNECTIONS + 1000};\nevents {{\n", 1)
            .replace(f"listen {HOST}:{self.port}", f"listen {HOST}:{self.port} backlog={LISTEN_BACKLOG}", 1)
        )
        if "worker_rlimit_nofile" not in tuned or "backlog=" not in tuned:
            raise RuntimeError("NginxServer.config() changed shape: bench/engine/target.py must follow it")
        return tuned


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def write_files(docroot: Path, sizes_bytes: dict[str, int]) -> None:
    docroot.mkdir(parents=True, exist_ok=True)
    for name, size in sizes_bytes.items():
        (docroot / name).write_bytes(b"x" * size)


def start_nginx(state_dir: Path, docroot: Path, extra_conf: str = "", *, http2: bool = False) -> BenchNginx:
    """Starts nginx (1 worker, access log off, `extra_conf` in its server block; `http2`: h2c by
    prior knowledge only) and pins its master and worker to SERVER_CORE. On a failed pin the
    server is stopped again before the error propagates."""
    quiet = "        access_log off;\n" + extra_conf
    server = BenchNginx(HOST, free_port(), docroot, state_dir, "nginx", workers=1, extra_conf=quiet, http2=http2)
    server.start()
    try:
        master = psutil.Process(server.pid)
        for pid in [master.pid] + [c.pid for c in master.children(recursive=True)]:
            subprocess.run(["taskset", "-cp", str(SERVER_CORE), str(pid)], check=True, stdout=subprocess.DEVNULL)
    except BaseException:
        server.stop()
        raise
    return server


@contextlib.contextmanager
def served_files(
    prefix: str,
    sizes_bytes: dict[str, int],
    *,
    fd_limit: int,
    extra_conf: str = "",
    contents: dict[str, bytes] | None = None,
    http2: bool = False,
) -> Iterator[tuple[str, Path]]:
    """What every engine bench runs in: the open-files limit raised to `fd_limit`, this process
    on the server's core (off the generator's), and nginx serving files of `sizes_bytes` from a
    new work directory (named with `prefix`), and files of `contents` beside them, with
    `extra_conf` in its server block (`http2`: speaking h2c only). Yields (the server's URL, the work directory);
    stops nginx and removes the directory at the end."""
    raise_fd_limit(fd_limit)
    os.sched_setaffinity(0, {SERVER_CORE})
    work = Path(tempfile.mkdtemp(prefix=prefix))
    server = None
    try:
        write_files(work / "docroot", sizes_bytes)
        for name, data in (contents or {}).items():
            (work / "docroot" / name).write_bytes(data)
        server = start_nginx(work / "state", work / "docroot", extra_conf, http2=http2)
        yield server.url, work
    finally:
        if server:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
