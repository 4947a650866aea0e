"""A disk spool of line-protocol batches, replayed oldest first, bounded in bytes.

One spool belongs to one sink (one run): its directory is locked (`flock` on `.lock`) for as
long as the sink lives, so runs that write to the same InfluxDB never share batch files. A
sink that ends with points still spooled releases the lock and leaves the directory; a
later sink to the same InfluxDB adopts such orphans (`adopt`: sibling directories whose lock
nobody holds) and sends them first, oldest run first.

Each batch is one file named by a sequence number and its number of points
(`000000000042-5000.lp`), so that order survives a restart of the controller and the spool
is known from the names alone: nothing is read back but the batches being sent, a few at a
time (`oldest`). A batch leaves the spool only after it was written to InfluxDB.

Bounded: the batches never take more than `limit_bytes` on disk together. Before a new
batch would pass the limit, the oldest go (not those being sent), and their points are
counted as dropped (`dropped`); a batch that cannot be written (a full disk) is dropped too,
and so is every batch of a spool whose directory cannot be made: the sink goes on, sending
what it can while InfluxDB is up.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
_BATCH = re.compile(r"(\d{12})-(\d+)\.lp")


@dataclass
class Batch:
    path: Path
    points: int
    bytes: int
    sending: bool = False


@dataclass(frozen=True)
class Dropped:
    """Points a spool dropped since it started, and why the latest went."""

    points: int = 0
    batches: int = 0
    cause: str = ""


class Spool:
    def __init__(self, directory: Path, limit_bytes: int, *, adopt: bool = False):
        """Owns `directory` (created; SpoolBusy if another live spool owns it), and with
        `adopt` the orphaned spools beside it."""
        self.directory = directory
        self.limit_bytes = limit_bytes
        self._locks: dict[Path, int] = {}
        self._batches: collections.deque[Batch] = collections.deque()
        self._bytes = 0
        self._dropped = Dropped()
        self._failed_cause = ""
        self._unusable = ""  # why the directory could not be made: nothing is spooled
        try:
            self._lock(directory, create=True)
        except OSError as exc:
            self._unusable = f"cannot make the spool {directory}: {exc.strerror or exc}"
            log.error("InfluxDB points that cannot be sent at once will be dropped: %s", self._unusable)
            self._next = 1
            return
        if adopt:
            for orphan in sorted(p for p in directory.parent.iterdir() if p != directory and (p / LOCK_FILE).is_file()):
                if self._lock(orphan, create=False):
                    self._index(orphan)
        self._index(directory)
        self._next = self._last_number(directory) + 1
        if self._bytes > self.limit_bytes:
            self._make_room(0)

    # ---- what the sink asks -------------------------------------------------------

    def push(self, lines: list[str]) -> None:
        """Spools a batch behind the others, dropping the oldest to stay within the limit, or
        this one when it cannot be written."""
        if self._unusable:
            self._drop_new(len(lines), self._unusable)
            return
        data = "\n".join(lines) + "\n"
        size = len(data.encode())
        if size > self.limit_bytes:
            self._drop_new(
                len(lines), f"a batch of {size} bytes is larger than the spool's limit of {_mib(self.limit_bytes)}"
            )
            return
        self._make_room(size)
        path = self.directory / f"{self._next:012d}-{len(lines)}.lp"
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(data)
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            self._drop_new(len(lines), f"cannot write the spool in {self.directory}: {exc.strerror or exc}")
            return
        self._next += 1
        self._failed_cause = ""
        self._batches.append(Batch(path, len(lines), size))
        self._bytes += size

    def oldest(self, max_points: int) -> list[Batch]:
        """The oldest batches, together at most `max_points` (at least one), marked as being
        sent: `remove` them once written, `release` them if not."""
        taken: list[Batch] = []
        points = 0
        for batch in self._batches:
            if taken and points + batch.points > max_points:
                break
            batch.sending = True
            taken.append(batch)
            points += batch.points
        return taken

    @staticmethod
    def read(batches: list[Batch]) -> list[str]:
        return [line for b in batches for line in b.path.read_text().splitlines()]

    def remove(self, batches: list[Batch]) -> None:
        for batch in batches:
            self._forget(batch)

    def release(self, batches: list[Batch]) -> None:
        for batch in batches:
            batch.sending = False

    def __len__(self) -> int:
        return len(self._batches)

    def points(self) -> int:
        return sum(b.points for b in self._batches)

    @property
    def bytes(self) -> int:
        return self._bytes

    def dropped(self) -> Dropped:
        return self._dropped

    def close(self) -> None:
        """Releases every directory: an empty one is removed, one with batches left is left
        for a later spool to adopt. Safe to call twice."""
        for directory, fd in list(self._locks.items()):
            if not any(b.path.parent == directory for b in self._batches):
                (directory / LOCK_FILE).unlink(missing_ok=True)
                _rmdir(directory)
            os.close(fd)
            del self._locks[directory]

    # ---- internals ----------------------------------------------------------------

    def _lock(self, directory: Path, *, create: bool) -> bool:
        if create:
            directory.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(directory / LOCK_FILE, os.O_RDWR | (os.O_CREAT if create else 0), 0o600)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if create:
                raise SpoolBusy(f"{directory} is the spool of a sink that is still running") from None
            return False
        self._locks[directory] = fd
        return True

    def _index(self, directory: Path) -> None:
        found = sorted(
            (int(m.group(1)), int(m.group(2)), p) for p in directory.iterdir() if (m := _BATCH.fullmatch(p.name))
        )
        for _, points, path in found:
            size = path.stat().st_size
            self._batches.append(Batch(path, points, size))
            self._bytes += size
        if found and directory != self.directory:
            log.warning(
                "sending %d points spooled by an earlier run first (%s)", sum(p for _, p, _ in found), directory
            )

    def _last_number(self, directory: Path) -> int:
        numbers = [int(m.group(1)) for p in directory.iterdir() if (m := _BATCH.fullmatch(p.name))]
        return max(numbers, default=0)

    def _make_room(self, size: int) -> None:
        cause = f"the spool reached its limit of {_mib(self.limit_bytes)}"
        while self._bytes + size > self.limit_bytes:
            victim = next((b for b in self._batches if not b.sending), None)
            if victim is None:
                return
            self._forget(victim)
            self._count(victim.points, cause)

    def _drop_new(self, points: int, cause: str) -> None:
        self._count(points, cause)
        if cause != self._failed_cause:
            log.error("dropped %d InfluxDB points instead of spooling them: %s", points, cause)
            self._failed_cause = cause

    def _count(self, points: int, cause: str) -> None:
        self._dropped = Dropped(self._dropped.points + points, self._dropped.batches + 1, cause)

    def _forget(self, batch: Batch) -> None:
        batch.path.unlink(missing_ok=True)
        self._batches.remove(batch)
        self._bytes -= batch.bytes
        directory = batch.path.parent
        if directory != self.directory and not any(b.path.parent == directory for b in self._batches):
            (directory / LOCK_FILE).unlink(missing_ok=True)  # an adopted spool, now empty
            _rmdir(directory)
            os.close(self._locks.pop(directory))


class SpoolBusy(Exception):
    """Another live spool owns the directory."""


def _rmdir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # something else lives there: left as it is
        directory.rmdir()


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:g} MiB"
