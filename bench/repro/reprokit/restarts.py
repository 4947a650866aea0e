"""Restarting a study's labs before each cell, so that a cell never inherits the previous cell's
server state (Apache's grown worker pool, Varnish's cache, HAProxy's queues, MariaDB's buffers).
The kit's labs are its own (it brings them up and down), so it may restart them; the servers
come back on the same addresses and ports (`loadfleet-lab restart`). The kernel's page cache is
not emptied: it belongs to the whole machine, and dropping it needs root.

A cell may keep its lab warm (`Cell.keep_warm`, with the reason: a soak that must keep its warm
state); its record then says so instead of listing restarts.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from .studies import Cell, LabSpec

RESTART_TIMEOUT_S = 300  # a whole lab's servers stopping and starting again
# What `loadfleet-lab restart` prints for each server it restarted.
RESTARTED_LINE = re.compile(
    r"^restarted (?P<name>[^:]+): \S+ \((?P<kind>[^,]+), pid (?P<old>[\d ]+) -> (?P<new>[\d ]+),"
)


class RestartError(Exception):
    """A lab whose servers would not restart; the message has the command's error."""


@dataclass(frozen=True)
class ServerRestart:
    name: str
    kind: str
    old_pids: tuple[int, ...]
    new_pids: tuple[int, ...]


@dataclass(frozen=True)
class LabRestart:
    """One lab's restart before a cell: when it began, how long it took, which servers."""

    state_dir: str
    started_utc: str
    seconds: float
    servers: tuple[ServerRestart, ...]


@dataclass(frozen=True)
class RestartRecord:
    """What a cell's evidence says about its servers before it ran."""

    restarted: bool
    labs: tuple[LabRestart, ...] = ()
    kept_warm_because: str = ""

    @property
    def summary(self) -> str:
        """The one-line `servers_before` of the cell's record (and the study's table)."""
        if not self.restarted:
            return f"not restarted ({self.kept_warm_because}); idle share recorded"
        count = sum(len(lab.servers) for lab in self.labs)
        took = sum(lab.seconds for lab in self.labs)
        return f"restarted {count} servers in {took:.1f} s; idle share recorded"


def parse_restarted(stdout: str) -> tuple[ServerRestart, ...]:
    """The servers `loadfleet-lab restart` reported, in the order it restarted them."""
    found = []
    for line in stdout.splitlines():
        match = RESTARTED_LINE.match(line.strip())
        if match:
            old, new = (tuple(int(p) for p in match[g].split()) for g in ("old", "new"))
            found.append(ServerRestart(match["name"], match["kind"], old, new))
    return tuple(found)


def restart_labs(
    labs: tuple[LabSpec, ...], cell: Cell, command: Callable[[LabSpec], list[str]], cwd: str
) -> RestartRecord:
    """Restarts every lab's servers before `cell` (unless it keeps them warm); `command` is the
    `loadfleet-lab restart` command line of a lab (niced like the kit's other lab commands)."""
    if cell.keep_warm:
        return RestartRecord(False, kept_warm_because=cell.keep_warm)
    done = []
    for lab in labs:
        started, began = dt.datetime.now(dt.UTC), time.monotonic()
        result = subprocess.run(command(lab), cwd=cwd, capture_output=True, text=True, timeout=RESTART_TIMEOUT_S)
        if result.returncode != 0:
            raise RestartError(
                f"{cell.name}: loadfleet-lab restart --state-dir {lab.state_dir} failed ({result.returncode}): "
                f"{result.stderr.strip()[-800:]}"
            )
        done.append(
            LabRestart(
                lab.state_dir,
                started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                round(time.monotonic() - began, 2),
                parse_restarted(result.stdout),
            )
        )
    return RestartRecord(True, tuple(done))
