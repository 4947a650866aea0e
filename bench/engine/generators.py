"""The two load generators under comparison, each run pinned to one core and measured the
same way: requests it completed and the CPU time (user + system) the kernel charged to it,
read from wait4's rusage once it has exited.

`run_engine` drives loadfleet-engine over its stdio protocol (proto/loadfleet/v1/engine.proto);
`run_wrk` runs wrk and parses its report. Every process started here is stopped by PID,
also when something fails, and a watchdog kills a generator that overruns its run."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from loadfleet.v1 import engine_pb2, job_pb2, stats_pb2
from loadfleet.wire.framing import frame
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import histogram_of

GENERATOR_CORE = 1
INTERVAL_MS = 1000
# A generator still running this long after its run should have ended is killed.
OVERRUN_S = 60.0


@dataclass(frozen=True)
class Measurement:
    """What one generator did in one run."""

    generator: str
    requests: int
    errors: int
    user_s: float
    sys_s: float
    # Voluntary context switches: how often the generator slept waiting for the network.
    sleeps: int
    p50_us: float | None

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    @property
    def requests_per_cpu_s(self) -> float:
        return self.requests / self.cpu_s if self.cpu_s else 0.0


# Called after every interval report with the engine's PID (e.g. to sample its memory).
IntervalWatch = Callable[[int, stats_pb2.IntervalReport], None]


@dataclass(frozen=True)
class Arrivals:
    """An open-model job with a session instead of closed clients: users arrive at `rate_per_s`,
    each sends a request, thinks `think_ms`, sends another and leaves; at most `max_users`."""

    rate_per_s: float
    think_ms: int
    max_users: int


def run_engine(
    engine: Path,
    url: str,
    path: str,
    *,
    clients: int,
    keep_alive: bool,
    duration_s: float,
    connect_timeout_ms: int = 5000,
    watch: IntervalWatch | None = None,
    log: Path | None = None,
    wrap: Sequence[str] = (),
    max_requests: int = 0,
    arrivals: Arrivals | None = None,
    shape: Callable[[job_pb2.JobSpec], None] | None = None,
) -> Measurement:
    """One closed-model job of `clients` clients against url+path for `duration_s` (or until
    `max_requests` requests, if set).
    `wrap` is put before the command (e.g. a `perf stat` that counts the engine's system calls);
    `shape` changes the job before it is sent (e.g. journey.py's requests and session)."""
    argv = [*wrap, "taskset", "-c", str(GENERATOR_CORE), str(engine)]
    with open(log or os.devnull, "ab") as stderr:  # the child keeps its own descriptor
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    with _Watchdog(proc.pid, duration_s + OVERRUN_S):
        try:
            event = _read_event(proc.stdout)
            if event is None or event.WhichOneof("event") != "ready":
                raise RuntimeError(f"engine: expected ready, got {event}")
            spec = _closed_job(
                url,
                path,
                clients=clients,
                keep_alive=keep_alive,
                duration_s=duration_s,
                connect_timeout_ms=connect_timeout_ms,
            )
            spec.max_requests = max_requests
            if arrivals:
                _arrive(spec, arrivals)
            if shape:
                shape(spec)
            proc.stdin.write(frame(engine_pb2.EngineCommand(start=spec).SerializeToString()))
            proc.stdin.flush()
            reports = _collect(proc, watch)
            proc.stdin.close()
            user_s, sys_s, sleeps = _reap(proc)
        finally:
            _kill(proc)
    rows = [s for r in reports for s in r.stats]
    histogram = Histogram.merge(histogram_of(row) for row in rows)
    p50 = histogram.percentiles([50])[0] if histogram else None
    return Measurement(
        "engine",
        requests=sum(s.requests for s in rows),
        errors=sum(e.count for s in rows for e in s.errors),
        user_s=user_s,
        sys_s=sys_s,
        sleeps=sleeps,
        p50_us=p50,
    )


def run_wrk(url: str, *, connections: int, keep_alive: bool, duration_s: int, wrap: Sequence[str] = ()) -> Measurement:
    """wrk -t1 (one load thread, as the engine is one thread) with `connections` connections;
    `wrap` as for run_engine."""
    argv = [
        *wrap,
        "taskset",
        "-c",
        str(GENERATOR_CORE),
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{duration_s}s",
        "--latency",
    ]
    if not keep_alive:
        argv += ["-H", "Connection: close"]
    return parse_wrk(*run_tool([*argv, url], duration_s, "wrk"))


def run_tool(argv: Sequence[str], duration_s: float, tool: str) -> tuple[str, float, float, int]:
    """Runs a reference load tool to its end (killed past its run by a watchdog): its output and
    the CPU seconds (user, system) and voluntary context switches the kernel charged to it."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    with _Watchdog(proc.pid, duration_s + OVERRUN_S):
        try:
            out = proc.stdout.read().decode(errors="replace")
            user_s, sys_s, sleeps = _reap(proc)
        finally:
            _kill(proc)
    if proc.returncode != 0:
        raise RuntimeError(f"{tool} exited {proc.returncode}: {out}")
    return out, user_s, sys_s, sleeps


def parse_wrk(out: str, user_s: float, sys_s: float, sleeps: int) -> Measurement:
    requests = re.search(r"(\d+) requests in", out)
    if not requests:
        raise RuntimeError(f"wrk output without a request count: {out}")
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    p50 = re.search(r"^\s*50%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    p50_us = float(p50.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[p50.group(2)] if p50 else None
    return Measurement(
        "wrk",
        requests=int(requests.group(1)),
        errors=errors + int(non_2xx.group(1) if non_2xx else 0),
        user_s=user_s,
        sys_s=sys_s,
        sleeps=sleeps,
        p50_us=p50_us,
    )


def _closed_job(
    url: str, path: str, *, clients: int, keep_alive: bool, duration_s: float, connect_timeout_ms: int
) -> job_pb2.JobSpec:
    start_at_ms = (int(time.time() * 1000) + 300 + INTERVAL_MS) // INTERVAL_MS * INTERVAL_MS
    return job_pb2.JobSpec(
        job_id="bench",
        targets=[job_pb2.Target(url=url, weight=1)],
        requests=[job_pb2.RequestSpec(name="file", method="GET", path=path, weight=1)],
        keep_alive=keep_alive,
        connect_timeout_ms=connect_timeout_ms,
        request_timeout_ms=10_000,
        load=job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=clients)),
        start_at_ms=start_at_ms,
        duration_ms=int(duration_s * 1000),
        interval_ms=INTERVAL_MS,
    )


def _arrive(spec: job_pb2.JobSpec, arrivals: Arrivals) -> None:
    """Turns a closed job into arriving users who walk a two-request session."""
    open_model = job_pb2.OpenModel(rate_per_s=arrivals.rate_per_s, max_connections=arrivals.max_users)
    spec.load.CopyFrom(job_pb2.LoadShare(open=open_model))
    think = job_pb2.ThinkTime(fixed_ms=arrivals.think_ms)
    spec.session.CopyFrom(
        job_pb2.Session(steps=[job_pb2.SessionStep(request=0, think_after=think), job_pb2.SessionStep(request=0)])
    )


def _collect(proc: subprocess.Popen, watch: IntervalWatch | None) -> list[stats_pb2.IntervalReport]:
    reports = []
    while True:
        event = _read_event(proc.stdout)
        kind = event.WhichOneof("event") if event else None
        if kind == "interval":
            reports.append(event.interval)
            if watch:
                watch(proc.pid, event.interval)
        elif kind == "finished":
            return reports
        else:
            raise RuntimeError(f"engine: unexpected event {event}")


def _read_event(stream: BinaryIO) -> engine_pb2.EngineEvent | None:
    """The next length-delimited EngineEvent; None at end of stream."""
    length, shift = 0, 0
    while True:
        byte = stream.read(1)
        if not byte:
            return None
        length |= (byte[0] & 0x7F) << shift
        shift += 7
        if not byte[0] & 0x80:
            break
    payload = stream.read(length)
    if len(payload) != length:
        raise RuntimeError("engine: stream ended inside a frame")
    return engine_pb2.EngineEvent.FromString(payload)


def _reap(proc: subprocess.Popen) -> tuple[float, float, int]:
    """Waits for the process: its CPU seconds (user, system) and voluntary context switches."""
    _, status, rusage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return rusage.ru_utime, rusage.ru_stime, rusage.ru_nvcsw


def _kill(proc: subprocess.Popen) -> None:
    """Stops the process by PID if it still runs (a failed or overrunning run)."""
    if proc.returncode is None:
        try:
            os.kill(proc.pid, signal.SIGKILL)
            os.waitpid(proc.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        proc.returncode = -signal.SIGKILL
    for pipe in (proc.stdin, proc.stdout):
        if pipe and not pipe.closed:
            with contextlib.suppress(OSError):
                pipe.close()


class _Watchdog:
    """Kills `pid` if the block has not ended within `limit_s`."""

    def __init__(self, pid: int, limit_s: float):
        self._timer = threading.Timer(limit_s, self._fire, args=(pid,))
        self._timer.daemon = True

    @staticmethod
    def _fire(pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
