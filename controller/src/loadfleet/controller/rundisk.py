"""A run's files on a disk that may fill up: the run goes on without what cannot be written.

The files appended as the run goes (intervals.csv, latency.hlog, events.jsonl, hosts.csv,
host_counters.csv, the journal's logs) are `AppendFile`s; the files written whole (plan.yaml,
steps.csv, summary.json, report.html, the journal's checkpoint) are written through
`DiskTrouble.attempt`. When a write fails (a full disk, ENOSPC or EDQUOT, or any other
OSError):

- an appended file is cut back to its last complete flush (every flush ends a whole interval,
  event or record) and written no more, not even by a controller that takes the run over
  (the journal lists it): it stays a clean beginning of what it should hold; the journal
  stops as a whole at its first failure, so that it stays consistent (journal.py);
- a file written whole keeps its earlier version, if any (it is written to a temporary name
  and renamed), and is whole again once a later version is written;
- the run's first failure is logged and reported once, naming the disk (a `disk_full`
  event); later ones only add their file to the list;
- the run goes on: its totals, steps and summary are computed in memory as ever, followers
  get the summary, and summary.json (when it can be written) lists `incomplete_files` and
  says so in its message.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)

# Errors that mean the disk is full rather than broken.
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class DiskTrouble:
    """Which of a run's files could not be written, and why. O(files of a run)."""

    def __init__(
        self,
        run_dir: Path,
        on_first: Callable[[str], object] = lambda text: None,
        on_incomplete: Callable[[str], object] = lambda name: None,
    ):
        """`on_first` gets the text of the run's first failure (once); `on_incomplete` the
        name of each file that fails."""
        self.run_dir = run_dir
        self._on_first = on_first
        self._on_incomplete = on_incomplete
        self._incomplete: list[str] = []
        self.first: str = ""  # the first failure, as told

    @property
    def incomplete(self) -> tuple[str, ...]:
        return tuple(self._incomplete)

    def failed(self, name: str, exc: OSError) -> None:
        """`name` (relative to the run directory) is incomplete: it could not be written."""
        if name in self._incomplete:
            return
        self._incomplete.append(name)
        self._on_incomplete(name)
        if self.first:
            log.info("%s: %s not written either (%s)", self.run_dir, name, exc.strerror or exc)
            return
        what = "is full" if exc.errno in FULL_ERRNOS else f"failed a write ({exc.strerror or exc})"
        self.first = (
            f"{describe_disk(self.run_dir)} {what}: {name} and later writes of the run directory may be "
            "incomplete; the run goes on, its totals and summary stay whole"
        )
        log.error("run directory %s: %s", self.run_dir, self.first)
        self._on_first(self.first)

    def cut_short(self, name: str) -> None:
        """`name` was left incomplete before a controller took the run over (its journal
        says so, or the file is shorter than the journal says): listed, left as it is,
        logged, and not told as an event again."""
        if name in self._incomplete:
            return
        self._incomplete.append(name)
        self.first = self.first or f"{name} was cut short before the controller took the run over"
        log.warning("%s: %s was cut short earlier (a full disk) and is written no more", self.run_dir, name)

    def has_failed(self, name: str) -> bool:
        return name in self._incomplete

    def attempt(self, name: str, write: Callable[[], object]) -> bool:
        """Runs `write` (a whole file, `name`); False when it failed (and is recorded)."""
        try:
            write()
        except OSError as exc:
            self.failed(name, exc)
            return False
        if name in self._incomplete:  # room was made: this version is whole
            self._incomplete.remove(name)
        return True

    def describe(self) -> str:
        """For the summary's message; empty when every file was written."""
        if not self._incomplete:
            return ""
        return f"{describe_disk(self.run_dir)} could not take every write: {', '.join(self._incomplete)} incomplete"


class AppendFile:
    """A file of the run directory appended to as the run goes (binary underneath, so that
    offsets are bytes). After a failed write it is cut back to its last flush and ignores
    further writes; `tell` then stays where it ends."""

    def __init__(self, path: Path, trouble: DiskTrouble, *, header: str | bytes = b"", keep_bytes: int | None = None):
        """New with `header`, or (resuming, `keep_bytes`) cut back to what a journal says was
        written, dropping a line half-written by a controller that died."""
        self.path = path
        self._trouble = trouble
        self._file: BinaryIO | None = None
        self._good = 0  # bytes complete on disk: the last flush
        try:
            if path.exists() and (trouble.has_failed(self._name()) or path.stat().st_size < (keep_bytes or 0)):
                self._good = path.stat().st_size  # left as it is: neither extended nor written
                trouble.cut_short(self._name())
            elif keep_bytes and path.exists():
                with path.open("r+b") as raw:
                    raw.truncate(keep_bytes)
                self._file = path.open("ab")
                self._good = keep_bytes
            else:
                self._file = path.open("wb")
                self.write(header)
        except OSError as exc:
            self._fail(exc)

    @property
    def closed(self) -> bool:
        return self._open_file() is None

    def _open_file(self) -> BinaryIO | None:
        """The file while it takes writes; None once closed (or when it was never opened)."""
        return None if self._file is None or self._file.closed else self._file

    def write(self, data: str | bytes) -> None:
        file = self._open_file()
        if file is None or not data:
            return
        try:
            file.write(data.encode() if isinstance(data, str) else data)
        except OSError as exc:
            self._fail(exc)

    def flush(self) -> None:
        file = self._open_file()
        if file is None:
            return
        try:
            file.flush()
        except OSError as exc:
            self._fail(exc)
        else:
            self._good = file.tell()

    def duplicate_fd(self) -> int | None:
        """Flushes, and returns a new descriptor of the file for making it durable
        (durable.Syncer: valid even once this file is closed; its taker closes it); None
        when the file takes no writes."""
        self.flush()
        file = self._open_file()
        if file is None:
            return None
        try:
            return os.dup(file.fileno())
        except OSError as exc:  # out of descriptors: not durable this time, still complete
            log.warning("%s could not be made durable now: %s", self.path, exc)
            return None

    def sync_failed(self, exc: OSError) -> None:
        """The disk could not make the file durable (an fsync error: what it holds may not
        survive the host): handled as a failed write, so it is listed incomplete and written
        no more."""
        if self._open_file() is not None:
            self._fail(exc)

    def tell(self) -> int:
        file = self._open_file()
        return self._good if file is None else file.tell()

    def restart(self) -> None:
        """Empties the file (the journal's interval log after a checkpoint)."""
        file = self._open_file()
        if file is None:
            return
        try:
            file.flush()
            file.truncate(0)
            file.seek(0)
            self._good = 0
        except OSError as exc:
            self._fail(exc)

    def close(self) -> None:
        """Flushes and closes; safe to call twice."""
        self.flush()
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()

    def _fail(self, exc: OSError) -> None:
        """Cut back to the last complete flush; nothing more goes to this file."""
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()  # what is still buffered is lost: it was not complete anyway
        with contextlib.suppress(OSError):
            os.truncate(self.path, self._good)
        self._file = None
        self._trouble.failed(self._name(), exc)

    def _name(self) -> str:
        run_dir = self._trouble.run_dir
        return str(self.path.relative_to(run_dir) if self.path.is_relative_to(run_dir) else self.path)


def describe_disk(path: Path) -> str:
    """The file system a path lives on, for a person: where it is mounted, its device and
    how much room it has left, e.g. "the disk of runs/ (/dev/sdb1 mounted at /data, 0 B of
    20 GB free)"."""
    path = Path(os.path.abspath(path))
    mount = path
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    device = _device_of(mount)
    try:
        st = os.statvfs(path if path.exists() else mount)
        room = f"{_size(st.f_bavail * st.f_frsize)} of {_size(st.f_blocks * st.f_frsize)} free"
    except OSError:
        room = "free space unknown"
    return f"the disk of {path} ({device + ' ' if device else ''}mounted at {mount}, {room})"


def _device_of(mount: Path) -> str:
    try:
        with open("/proc/self/mounts") as f:
            entries = [line.split() for line in f]
    except OSError:
        return ""
    found = [e[0] for e in entries if len(e) >= 3 and e[1] == str(mount)]
    return found[-1] if found else ""  # the last mount at a path is the one in effect


def _size(n_bytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n_bytes < 1000 or unit == "TB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1000
    return ""
