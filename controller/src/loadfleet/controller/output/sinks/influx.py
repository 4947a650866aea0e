"""The InfluxDB sink: batched line-protocol writes, retried with backoff, spooled to
disk while InfluxDB is unreachable (spool.py: one spool per sink, bounded, its oldest points
dropped and counted past its limit) and replayed in order when it returns.

Works with InfluxDB 1.8 (the v2-compatible /api/v2/write; token "user:password" or
empty, bucket "db/retention-policy") and with 2.x (token, org, bucket).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadfleet.controller.output.sinks.lineproto import Point
from loadfleet.controller.output.sinks.spool import Dropped, Spool

log = logging.getLogger(__name__)

DEFAULT_BATCH_POINTS = 5000
DEFAULT_FLUSH_INTERVAL_S = 1.0
# Points kept in memory while InfluxDB is slow; beyond this they go to disk. While it is
# down (a write failed and none has succeeded since), points go to disk every flush.
DEFAULT_MEMORY_POINTS = 50_000
# The spool's size limit, MiB (loadfleet controller --influx-spool-limit-mb): an hour of a
# 500-agent fleet's points (~0.3 MB/s), or days of a small one.
DEFAULT_SPOOL_LIMIT_MB = 1024.0
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 10.0
DEFAULT_CLOSE_TIMEOUT_S = 15.0
WRITE_TIMEOUT_MS = 10_000
# Refused batches are logged at most once in this many seconds (the rest are counted), and
# with at most this much of InfluxDB's answer: a point it refuses comes back every flush.
REJECTION_LOG_PERIOD_S = 60.0
MAX_REJECTION_LOG_CHARS = 300


@dataclass(frozen=True)
class InfluxConfig:
    url: str
    bucket: str = "loadfleet/autogen"
    org: str = "-"
    token: str = ""


class InfluxUnavailable(Exception):
    """A write did not reach InfluxDB (network, timeout, 5xx); the batch is kept."""


class InfluxRejected(Exception):
    """InfluxDB refused a batch as invalid (4xx); retrying cannot help."""


def influx_writer(config: InfluxConfig) -> Callable[[list[str]], None]:
    """A blocking writer of line-protocol batches; foreign errors are translated here."""
    from influxdb_client import InfluxDBClient
    from influxdb_client.client.write_api import SYNCHRONOUS
    from influxdb_client.rest import ApiException

    client = InfluxDBClient(
        url=config.url, token=config.token or ":", org=config.org, timeout=WRITE_TIMEOUT_MS, retries=False
    )
    api = client.write_api(write_options=SYNCHRONOUS)

    def write(lines: list[str]) -> None:
        try:
            # influxdb_client annotates a WritePrecision, whose constants are plain strings ("ms")
            api.write(bucket=config.bucket, org=config.org, record="\n".join(lines), write_precision="ms")  # type: ignore[arg-type]
        except ApiException as exc:
            if exc.status and 400 <= exc.status < 500 and exc.status not in (404, 408, 429):
                raise InfluxRejected(f"InfluxDB refused a batch: {exc.status} {exc.body}") from exc
            raise InfluxUnavailable(f"InfluxDB answered {exc.status}: {exc.reason}") from exc
        except Exception as exc:  # urllib3/socket errors: the server is not reachable
            raise InfluxUnavailable(f"cannot reach InfluxDB at {config.url}: {exc}") from exc

    return write


class InfluxSink:
    def __init__(
        self,
        write: Callable[[list[str]], None],
        spool_dir: Path,
        *,
        batch_points: int = DEFAULT_BATCH_POINTS,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        memory_points: int = DEFAULT_MEMORY_POINTS,
        spool_limit_bytes: int = int(DEFAULT_SPOOL_LIMIT_MB * 2**20),
        adopt_orphans: bool = False,
        description: str = "InfluxDB",
    ):
        """`spool_dir` is this sink's own; with `adopt_orphans`, spools that ended sinks left
        beside it are sent first (spool.py)."""
        self._write = write
        self._spool = Spool(spool_dir, spool_limit_bytes, adopt=adopt_orphans)
        self._batch_points = batch_points
        self._flush_interval_s = flush_interval_s
        self._memory_points = memory_points
        self._description = description
        self._pending: collections.deque[str] = collections.deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._retry_at = 0.0
        self._backoff_s = BACKOFF_FIRST_S
        self._outage_logged = False
        self.written_points = 0
        self.rejected_points = 0
        self._rejection_logged_at: float | None = None
        self._rejected_unlogged = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="influx-sink")

    def add(self, points: list[Point]) -> None:
        self._pending.extend(line for p in points if (line := p.line()))
        while len(self._pending) > self._memory_points:
            self._spill(self._batch_points)
        if len(self._pending) >= self._batch_points:
            self._wake.set()

    def dropped(self) -> Dropped:
        """What the spool dropped since the sink started (sinks.DropCounting)."""
        return self._spool.dropped()

    def _spill(self, n: int) -> None:
        """The oldest `n` pending points to the spool."""
        self._spool.push([self._pending.popleft() for _ in range(min(n, len(self._pending)))])

    async def close(self, timeout_s: float = DEFAULT_CLOSE_TIMEOUT_S) -> str:
        # The writer loop is told to end rather than cancelled: a cancel can land in the
        # middle of a write, and wait_for() on 3.11 may swallow it.
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None
        self._retry_at = 0.0
        deadline = time.monotonic() + timeout_s
        while (self._pending or len(self._spool)) and time.monotonic() < deadline:
            if not await self._drain_once():
                await asyncio.sleep(min(self._backoff_s, max(0.0, deadline - time.monotonic())))
        while self._pending:
            self._spill(self._batch_points)
        left = self._spool.points()
        self._spool.close()
        account = f"{self.written_points} points written to {self._description}"
        if self.rejected_points:
            account += f", {self.rejected_points} rejected as invalid"
        if dropped := self._spool.dropped().points:
            account += f", {dropped} dropped from the spool ({self._spool.dropped().cause})"
        if left:
            account += f"; {left} points wait in {self._spool.directory} and are sent when InfluxDB is back"
        return account

    async def _run(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._flush_interval_s):
                    await self._wake.wait()
            self._wake.clear()
            while not self._closing and (self._pending or len(self._spool)) and time.monotonic() >= self._retry_at:
                if not await self._drain_once():
                    break
            while self._outage_logged and self._pending:  # InfluxDB is down: onto disk, where it lasts
                self._spill(self._batch_points)

    async def _drain_once(self) -> bool:
        """Writes one batch, spooled batches first (order is kept). False on failure."""
        spooled = self._spool.oldest(self._batch_points)
        if spooled:
            try:
                lines = Spool.read(spooled)
            except OSError as exc:
                log.error("cannot read spooled points back (%s); dropping them", exc)
                self._spool.remove(spooled)
                return True
        else:
            n = min(self._batch_points, len(self._pending))
            lines = [self._pending.popleft() for _ in range(n)]
        try:
            await asyncio.to_thread(self._write, lines)
        except InfluxRejected as exc:
            self._rejected(exc, len(lines))
        except InfluxUnavailable as exc:
            if spooled:
                self._spool.release(spooled)
            else:
                self._spool.push(lines)
            self._failed(exc)
            return False
        else:
            self.written_points += len(lines)
            self._recovered()
        self._spool.remove(spooled)
        return True

    def _rejected(self, exc: InfluxRejected, n: int) -> None:
        """A refused batch is dropped and counted; logged once a period, with the count since."""
        self.rejected_points += n
        self._rejected_unlogged += n
        now = time.monotonic()
        if self._rejection_logged_at is not None and now - self._rejection_logged_at < REJECTION_LOG_PERIOD_S:
            return
        text = str(exc)
        if len(text) > MAX_REJECTION_LOG_CHARS:
            text = text[:MAX_REJECTION_LOG_CHARS] + "…"
        log.error(
            "%s; dropping %d points (%d refused in all; refusals are logged at most once in %g s)",
            text,
            self._rejected_unlogged,
            self.rejected_points,
            REJECTION_LOG_PERIOD_S,
        )
        self._rejection_logged_at, self._rejected_unlogged = now, 0

    def _failed(self, exc: Exception) -> None:
        if not self._outage_logged:
            log.warning("%s; spooling points to %s and retrying", exc, self._spool.directory)
            self._outage_logged = True
        self._retry_at = time.monotonic() + self._backoff_s
        self._backoff_s = min(BACKOFF_MAX_S, self._backoff_s * 2)

    def _recovered(self) -> None:
        if self._outage_logged:
            log.warning("%s is back; replaying spooled points", self._description)
            self._outage_logged = False
        self._backoff_s = BACKOFF_FIRST_S
        self._retry_at = 0.0
