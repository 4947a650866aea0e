"""Processes the bench starts (controller, simulators), each stopped by its PID.

Children stay in the bench's process group, so whoever stops the bench's group (a test,
Ctrl-C) stops them too; `stop_all` stops each one by PID, TERM first and KILL after a
grace period, and is safe to call twice.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

STOP_GRACE_S = 10.0


class Children:
    def __init__(self, log_dir: Path):
        self._log_dir = log_dir
        self.started: dict[str, subprocess.Popen] = {}

    def start(self, name: str, args: list[str], *, stdout=None) -> subprocess.Popen:
        with open(self.log_path(name), "wb") as log:  # the child holds its own descriptor
            proc = subprocess.Popen(args, stdout=stdout or log, stderr=log, stdin=subprocess.DEVNULL)
        self.started[name] = proc
        return proc

    def log_path(self, name: str) -> Path:
        return self._log_dir / f"{name}.log"

    def log_tail(self, name: str, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path(name).read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def stop(self, name: str, grace_s: float = STOP_GRACE_S) -> int | None:
        """TERM, then KILL after `grace_s`; returns the exit status."""
        proc = self.started[name]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def stop_many(self, names: list[str], grace_s: float = STOP_GRACE_S) -> dict[str, int | None]:
        """Signals them all first, so they shut down side by side."""
        for name in names:
            if self.started[name].poll() is None:
                self.started[name].send_signal(signal.SIGTERM)
        return {name: self.stop(name, grace_s) for name in names}

    def stop_all(self) -> None:
        self.stop_many(list(self.started))
