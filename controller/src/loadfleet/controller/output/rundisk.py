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
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from loadfleet.controller.output.diskwriter import DiskWriter

log = logging.getLogger(__name__)

# Errors that mean the disk is full rather than broken.
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# A sync slower than this is logged: the disk is what would have stalled the run.
SLOW_SYNC_S = 1.0


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
        self.written(name)
        return True

    def written(self, name: str) -> None:
        """`name` (a whole file) was written: whole again, if a failure had left it incomplete."""
        if name in self._incomplete:  # room was made
            self._incomplete.remove(name)

    def describe(self) -> str:
        """For the summary's message; empty when every file was written."""
        if not self._incomplete:
            return ""
        return f"{describe_disk(self.run_dir)} could not take every write: {', '.join(self._incomplete)} incomplete"


class AppendFile:
    """A file of the run directory appended to as the run goes (binary underneath, so that
    offsets are bytes), written by the run's DiskWriter: in order, in its thread while the
    event loop runs (diskwriter.py). After a failed write it is cut back to its last flush and
    ignores further writes; `tell` then stays where it ends. Files joined by `stop_with` stop
    together at the first failure of either (the journal's)."""

    def __init__(
        self,
        path: Path,
        trouble: DiskTrouble,
        *,
        header: str | bytes = b"",
        keep_bytes: int | None = None,
        disk: DiskWriter | None = None,
    ):
        """New with `header`, or (resuming, `keep_bytes`) cut back to what a journal says was
        written, dropping a line half-written by a controller that died. Opened at once."""
        self.path = path
        self._trouble = trouble
        self._disk = disk or DiskWriter()
        self._fellows: list[AppendFile] = []
        self._told = 0  # bytes handed to the disk: where the file will end (the loop's)
        self._closing = False  # the loop's: close() was asked
        self._unflushed = False  # the loop's: written since the last flush
        # The disk's (its thread's once the run goes): the file, what is complete on it (the
        # last flush), whether it stopped.
        self._file: BinaryIO | None = None
        self._good = 0
        self._stopped = False
        try:
            if path.exists() and (trouble.has_failed(self._name()) or path.stat().st_size < (keep_bytes or 0)):
                self._good = self._told = path.stat().st_size  # left as it is: neither extended nor written
                self._stopped = True
                trouble.cut_short(self._name())
            elif keep_bytes and path.exists():
                with path.open("r+b") as raw:
                    raw.truncate(keep_bytes)
                self._file = path.open("ab")
                self._good = self._told = keep_bytes
            else:
                self._file = path.open("wb")
                self.write(header)
        except OSError as exc:
            self._fail(exc)

    def stop_with(self, other: AppendFile) -> None:
        """This file and `other` stop together (in the order of the disk's work)."""
        self._fellows.append(other)
        other._fellows.append(self)

    @property
    def closed(self) -> bool:
        """Takes no more writes: closed, or stopped by a failure (as far as the loop knows)."""
        return self._closing or self._stopped

    def write(self, data: str | bytes) -> None:
        if self.closed or not data:
            return
        raw = data.encode() if isinstance(data, str) else data
        self._told += len(raw)
        self._unflushed = True
        self._disk.submit(lambda: self._write_now(raw), len(raw))

    def flush(self) -> None:
        """What is written goes to the OS: it survives the process dying (not the host)."""
        if self._unflushed and not self.closed:
            self._unflushed = False
            self._disk.submit(self._flush_now)

    def sync(self) -> None:
        """Flushed and made durable (fsync): survives the host crashing too."""
        if not self.closed:
            self._disk.submit(self._sync_now)

    def tell(self) -> int:
        """Where the file ends once what was written is on disk."""
        return self._good if self._stopped else self._told

    def close(self) -> None:
        """Flushes and closes; safe to call twice."""
        if not self._closing:
            self._closing = True
            self._disk.submit(self._close_now)

    # ---- the disk's side (diskwriter.py: in its thread while the run goes) --------------

    def _write_now(self, raw: bytes) -> None:
        if self._file is None:
            return
        try:
            self._file.write(raw)
        except OSError as exc:
            self._fail(exc)

    def _flush_now(self) -> None:
        if self._file is None:
            return
        try:
            self._file.flush()
        except OSError as exc:
            self._fail(exc)
        else:
            self._good = self._file.tell()

    def _sync_now(self) -> None:
        self._flush_now()
        if self._file is None:
            return
        started = time.monotonic()
        try:
            os.fsync(self._file.fileno())
        except OSError as exc:  # what it holds may not survive the host: a failed write
            self._fail(exc)
        took = time.monotonic() - started
        if took >= SLOW_SYNC_S:
            log.warning("the disk took %.1f s to make %s durable (fsync; the run did not wait for it)", took, self.path)

    @property
    def open_now(self) -> bool:
        """The disk's side: whether the file takes writes at this point of the disk's work."""
        return self._file is not None

    def restart_now(self) -> None:
        """From an operation of the disk's: empties the file (the journal's interval log after
        a checkpoint). `tell` then says no more where it ends."""
        if self._file is None:
            return
        try:
            self._file.flush()
            self._file.truncate(0)
            self._file.seek(0)
            self._good = 0
        except OSError as exc:
            self._fail(exc)

    def _close_now(self) -> None:
        self._flush_now()
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def stop_now(self) -> None:
        """Written no more from here, with what is complete kept (and its fellows' too)."""
        if self._stopped:
            return
        self._stopped = True
        self._close_now()
        for fellow in self._fellows:
            fellow.stop_now()

    def _fail(self, exc: OSError) -> None:
        """Cut back to the last complete flush; nothing more goes to this file (nor its
        fellows); `trouble` told on the loop."""
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()  # what is still buffered is lost: it was not complete anyway
        with contextlib.suppress(OSError):
            os.truncate(self.path, self._good)
        self._file = None
        self.stop_now()
        name = self._name()
        self._disk.on_loop(lambda: self._trouble.failed(name, exc))

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
