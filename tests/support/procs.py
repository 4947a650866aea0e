"""Shared helpers for tests that start real processes: free ports, and processes that
are always stopped by PID, even when a test fails."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


# Under pytest-xdist each worker (PYTEST_XDIST_WORKER=gw0, gw1, ...) takes its ports from its own
# block below the kernel's ephemeral range (32768+ on Linux), so two workers never pick the same
# free port between one's probe and its server's bind. Serial runs keep asking the kernel (port 0).
_WORKER_PORT_BASE = 20000
_WORKER_PORT_BLOCK = 1000  # ports per worker: 12 workers fit below 32768
_next_port_offset = 0  # the next offset tried in this worker's block; wraps at the block's end


def _worker_index() -> int | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None


def free_port(host: str = "127.0.0.1") -> int:
    index = _worker_index()
    if index is None:
        with socket.socket() as s:
            s.bind((host, 0))
            return s.getsockname()[1]
    return _free_port_in_block(host, _WORKER_PORT_BASE + index * _WORKER_PORT_BLOCK)


def _free_port_in_block(host: str, base: int) -> int:
    """The next port of this worker's block that binds now; successive calls move on, so a
    test that asks for several ports before starting its servers gets distinct ones."""
    global _next_port_offset
    for _ in range(_WORKER_PORT_BLOCK):
        port = base + _next_port_offset
        _next_port_offset = (_next_port_offset + 1) % _WORKER_PORT_BLOCK
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port on {host} in {base}..{base + _WORKER_PORT_BLOCK - 1}")


def wait_for_port(host: str, port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout_s} s")


@contextmanager
def stopped(proc: subprocess.Popen) -> Iterator[float]:
    """The process stopped (SIGSTOP) for the block, as a stalled host would be, and continued
    whatever happens; yields when it was stopped (time.monotonic())."""
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield time.monotonic()
    finally:
        os.kill(proc.pid, signal.SIGCONT)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Processes:
    """Starts processes and stops every one of them by PID at teardown."""

    def __init__(self, log_dir: Path):
        self._log_dir = log_dir
        self.started: list[subprocess.Popen] = []

    def start(self, name: str, args: list[str], **kwargs) -> subprocess.Popen:
        with open(self._log_dir / f"{name}.log", "wb") as log:  # the child keeps its own descriptor
            proc = subprocess.Popen(
                args,
                stdout=kwargs.pop("stdout", log),
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                **kwargs,
            )
        proc.log_path = self._log_dir / f"{name}.log"
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in self.started:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def program(name: str) -> str:
    """A console script of the environment running the tests (the project's venv)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} is not installed (run `make setup`)")
    return found
