"""The outbox's disk spool: messages in segment files, oldest first, bounded in bytes.

Segments `outbox-<n>.spool` (n increasing) hold length-delimited `AgentMessage` frames in
the order they were put. The newest segment is appended to; the oldest is read back from
where reading stopped. A segment grows to a `SEGMENTS`th of the limit, then the next one
starts, so the spool can give up its oldest data a segment at a time, without copying.

Bounded: the segments never hold more than `limit_bytes` together. Before a frame would pass
the limit, the oldest segment goes. What of it was read back is in the outbox's memory
already (and stays there until acknowledged); what was not is dropped. A frame that cannot be
written (a full disk) is dropped too. Each job's dropped stretch is replaced by a notice, a
`SpoolDrop` message, which is read back before anything still spooled: it enters the
agent's sequence where the dropped messages would have, so the controller hears of them in
order and stops waiting for them (agent.proto). Nothing here numbers messages: the outbox
numbers them as they enter memory, so dropping never leaves a gap in the numbers.

A segment stays on disk until everything read back from it is acknowledged (an agent that
dies meanwhile sends it again when it restarts), unless the limit needs its room first.
Notices live in memory only: an agent that dies loses them with its memory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadfleet.v1 import agent_pb2
from loadfleet.wire.framing import FramingError, frame, parse_frames
from loadfleet.wire.stats import TOTAL

log = logging.getLogger(__name__)

# The spool's default size limit, MiB (loadfleet-agent --spool-limit-mb): about 14 hours of
# 1 s reports of 10 rows (~5 KB each), or an hour of 100 rows, far beyond any lease.
DEFAULT_LIMIT_MB = 256.0
# A segment holds up to this fraction of the limit: the most dropped at once (an eighth).
SEGMENTS = 8
# A segment is never smaller than this, whatever the limit (very small limits are for tests).
MIN_SEGMENT_BYTES = 4096
# Messages and bytes read back from the spool at a time.
READ_BACK_BATCH = 64
READ_BACK_BYTES = 8 << 20  # more than any message (gRPC's 4 MiB limit)
LEGACY_FILE = "outbox.spool"  # one file, as agents before segments wrote it
_SEGMENT = re.compile(r"outbox-(\d{12})\.spool")


@dataclass
class Tally:
    """Messages of one job in a stretch of the spool: what a `SpoolDrop` says."""

    messages: int = 0
    reports: int = 0
    requests: int = 0
    first_interval_ms: int = 0
    last_interval_ms: int = 0

    def add(self, message: agent_pb2.AgentMessage) -> None:
        self.messages += 1
        if message.WhichOneof("body") == "interval":
            report = message.interval.report
            self.reports += 1
            self.requests += sum(s.requests for s in report.stats if s.target == TOTAL and s.request == TOTAL)
            start = report.interval_start_ms
            self.first_interval_ms = min(self.first_interval_ms or start, start)
            self.last_interval_ms = max(self.last_interval_ms, start)

    def merge(self, other: Tally) -> None:
        self.messages += other.messages
        self.reports += other.reports
        self.requests += other.requests
        self.first_interval_ms = min((t for t in (self.first_interval_ms, other.first_interval_ms) if t), default=0)
        self.last_interval_ms = max(self.last_interval_ms, other.last_interval_ms)

    def notice(self, job_id: str, cause: str) -> agent_pb2.AgentMessage:
        return agent_pb2.AgentMessage(
            spool_drop=agent_pb2.SpoolDrop(
                job_id=job_id,
                messages=self.messages,
                reports=self.reports,
                requests=self.requests,
                first_interval_ms=self.first_interval_ms,
                last_interval_ms=self.last_interval_ms,
                cause=cause,
            )
        )


@dataclass
class _Notice:
    """A job's dropped stretch, to be told (`oldest`: from the head of the spool, else the
    newest messages, which could not be written)."""

    job_id: str
    tally: Tally
    cause: str
    oldest: bool


def job_of(message: agent_pb2.AgentMessage) -> str:
    kind = message.WhichOneof("body")
    return getattr(message, kind).job_id if kind in ("interval", "job_status", "artifact", "spool_drop") else ""


@dataclass
class _Segment:
    path: Path
    size: int
    read_offset: int = 0
    last_seq: int = 0  # the last message read back from it, as the outbox numbered it

    @property
    def fully_read(self) -> bool:
        return self.read_offset >= self.size


def limit_bytes_of(limit_mb: float) -> int:
    return max(1, int(limit_mb * 2**20))


class Spool:
    """See the module's docstring. Not thread-safe: the agent's event loop owns it."""

    def __init__(self, directory: Path, limit_bytes: int = limit_bytes_of(DEFAULT_LIMIT_MB)):
        self.directory = directory
        self.limit_bytes = limit_bytes
        self.segment_bytes = max(MIN_SEGMENT_BYTES, limit_bytes // SEGMENTS)
        self._segments: list[_Segment] = self._existing()
        # Notices of dropped stretches, read back before any segment: O(jobs), as a drop
        # merges into the job's notice not read back yet when the two stretches are adjacent.
        self._notices: list[_Notice] = []
        self._last_put_dropped = False  # the last message appended was dropped, not written
        self.dropped_messages = 0  # since the agent started
        self._write_failed = ""  # the last write error logged (logged once until writes work)

    def _existing(self) -> list[_Segment]:
        if not self.directory.is_dir():
            return []
        legacy = self.directory / LEGACY_FILE
        if legacy.exists():
            legacy.rename(self.directory / "outbox-000000000000.spool")
        found = sorted((int(m.group(1)), p) for p in self.directory.iterdir() if (m := _SEGMENT.fullmatch(p.name)))
        return [_Segment(path, path.stat().st_size) for _, path in found]

    @property
    def bytes_on_disk(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def has_unread(self) -> bool:
        return bool(self._notices) or any(not s.fully_read for s in self._segments)

    def append(self, message: agent_pb2.AgentMessage) -> None:
        """Puts a message behind everything on disk; drops the oldest when over the limit, or
        this message when it cannot be written."""
        data = frame(message.SerializeToString())
        if len(data) > self.limit_bytes:
            self._dropped_one(
                message, f"a message of {len(data)} bytes is larger than the spool's limit of {_mib(self.limit_bytes)}"
            )
            return
        while self._segments and self.bytes_on_disk + len(data) > self.limit_bytes:
            self._drop_oldest(f"the spool reached its limit of {_mib(self.limit_bytes)}")
        try:
            segment = self._segment_for(len(data))
            self._write(segment, data)
        except OSError as exc:
            self._dropped_one(message, f"cannot write the spool in {self.directory}: {exc.strerror or exc}")
            if self._segments and self._segments[-1].size == 0:
                self._forget(self._segments[-1])
            return
        self._write_failed = ""
        segment.size += len(data)
        self._last_put_dropped = False

    def read_back(self, hold: Callable[[agent_pb2.AgentMessage], int], room: int) -> int:
        """Hands up to `room` messages, oldest first, to `hold` (which numbers them and
        returns the number); returns how many."""
        handed = 0
        while handed < room and self._notices:
            notice = self._notices.pop(0)
            hold(notice.tally.notice(notice.job_id, notice.cause))
            handed += 1
        while handed < room and self._segments:
            segment = next((s for s in self._segments if not s.fully_read), None)
            if segment is None:
                break
            messages = self._read(segment, min(room - handed, READ_BACK_BATCH))
            for message in messages:
                segment.last_seq = hold(message)
            handed += len(messages)
        return handed

    def release(self, acked_seq: int) -> None:
        """Removes the segments read back in full whose every message is acknowledged."""
        for segment in [s for s in self._segments if s.fully_read and s.last_seq <= acked_seq]:
            self._forget(segment)

    # ---- internals -----------------------------------------------------------------

    def _segment_for(self, n_bytes: int) -> _Segment:
        last = self._segments[-1] if self._segments else None
        if last is not None and last.size + n_bytes <= self.segment_bytes:
            return last
        number = 1
        if last is not None:
            match = _SEGMENT.fullmatch(last.path.name)
            assert match is not None, "segments are named outbox-NUMBER.spool"
            number = int(match.group(1)) + 1
        self.directory.mkdir(parents=True, exist_ok=True)
        segment = _Segment(self.directory / f"outbox-{number:012d}.spool", 0)
        self._segments.append(segment)
        return segment

    def _write(self, segment: _Segment, data: bytes) -> None:
        """Appends a whole frame, or nothing: a frame cut short would garble what follows."""
        fd = os.open(segment.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, segment.size)
            raise
        finally:
            os.close(fd)

    def _read(self, segment: _Segment, limit: int) -> list[agent_pb2.AgentMessage]:
        with segment.path.open("rb") as f:
            f.seek(segment.read_offset)
            chunk = f.read(READ_BACK_BYTES)
        if not chunk:  # shorter than written (cut by someone else): nothing more to read
            segment.read_offset = segment.size
            return []
        try:
            frames, used = parse_frames(chunk, limit=limit)
        except FramingError as exc:
            frames, used = [], len(chunk)
            log.error(
                "spool %s is damaged after byte %d (%s); skipping the rest", segment.path, segment.read_offset, exc
            )
        if not frames:
            if len(chunk) < READ_BACK_BYTES:  # a frame cut short (the agent died writing it)
                log.error("skipping %d unreadable bytes at the end of %s", len(chunk), segment.path)
            used = len(chunk)
        segment.read_offset += used
        if segment.fully_read:
            segment.read_offset = segment.size
        return [agent_pb2.AgentMessage.FromString(data) for data in frames]

    def _drop_oldest(self, cause: str) -> None:
        segment = self._segments[0]
        tallies = self._count_unread(segment)
        self._forget(segment)
        for job_id, tally in tallies.items():
            self._noted(job_id, tally, cause, oldest=True)
        if tallies:
            log.warning(
                "dropped %d unsent messages from the spool (%s)", sum(t.messages for t in tallies.values()), cause
            )

    def _count_unread(self, segment: _Segment) -> dict[str, Tally]:
        """The messages of a segment not read back yet, per job: read now to be counted (a
        segment at a time, only when the limit drops one: rare, and cheaper than keeping
        tallies of everything spooled)."""
        tallies: dict[str, Tally] = {}
        while not segment.fully_read:
            for message in self._read(segment, READ_BACK_BATCH):
                tallies.setdefault(job_of(message), Tally()).add(message)
        return tallies

    def _dropped_one(self, message: agent_pb2.AgentMessage, cause: str) -> None:
        tally = Tally()
        tally.add(message)
        self._noted(job_of(message), tally, cause, oldest=False)
        if cause != self._write_failed:
            log.error("dropped a message instead of spooling it: %s", cause)
            self._write_failed = cause

    def _noted(self, job_id: str, tally: Tally, cause: str, *, oldest: bool) -> None:
        """A dropped stretch of a job, told in a notice. It joins the job's notice not read
        back yet when the two stretches are adjacent in the job's order: both dropped from
        the head of the spool (nothing was read back since that notice, or it would have
        been read first), or both the newest messages, with nothing spooled between them."""
        self.dropped_messages += tally.messages
        adjacent = [
            n
            for n in self._notices
            if n.job_id == job_id
            and n.oldest == oldest
            and (oldest or (n is self._notices[-1] and self._last_put_dropped))
        ]
        if adjacent:
            adjacent[0].tally.merge(tally)
            adjacent[0].cause = cause
        else:
            self._notices.append(_Notice(job_id, tally, cause, oldest))
        self._last_put_dropped = not oldest

    def _forget(self, segment: _Segment) -> None:
        segment.path.unlink(missing_ok=True)
        self._segments.remove(segment)


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:g} MiB"
