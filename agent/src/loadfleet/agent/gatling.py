"""Gatling as a driver: one JVM per job running agent/gatling's JobSimulation.

The JVM gets the job as a file (the JobSpec in protobuf's JSON mapping) and prints the same
EngineEvents as the native engine, one per stdout line after a `##loadfleet ` prefix (the
hook in agent/gatling, docs/gatling.md); every other stdout line is Gatling's console and is
kept only as a tail for error messages. So a `GatlingProcess` offers what an `EngineProcess`
does and the job merges Gatling's intervals exactly like engines'.

Commands go to the JVM's stdin as lines: `stop` (graceful); end of stdin makes it halt, so
an agent that dies leaves no orphan load.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import json_format

from loadfleet.v1 import engine_pb2, job_pb2

from .errors import EngineError

log = logging.getLogger(__name__)

EVENT_PREFIX = "##loadfleet "
GATLING_HOME_ENV = "LOADFLEET_GATLING_HOME"
JAVA_ENV = "LOADFLEET_JAVA"
SIMULATION = "loadfleet.gatling.JobSimulation"
LAUNCHER = "loadfleet.gatling.Launcher"
# JVM start-up, Gatling's class loading and its warm-up request take 3-8 s here; allow slow hosts.
READY_TIMEOUT_S = 60.0
OUTPUT_TAIL_LINES = 20
EXIT_GRACE_S = 5.0
STREAM_LIMIT_BYTES = 16 * 2**20
# The JVM options Gatling's own launchers use on Java 17.
JVM_OPTIONS = (
    "-server", "-XX:+HeapDumpOnOutOfMemoryError", "-XX:MaxInlineLevel=20", "-XX:MaxTrivialSize=12",
    "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
)


def parse_event_line(line: str) -> engine_pb2.EngineEvent | None:
    """The EngineEvent on a `##loadfleet ` line; None for any other line (Gatling's own output).

    Raises EngineError when a prefixed line does not hold a valid EngineEvent."""
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        return json_format.Parse(line[len(EVENT_PREFIX):], engine_pb2.EngineEvent())
    except json_format.ParseError as exc:
        raise EngineError(f"the Gatling hook printed an invalid event ({exc}): {line[:200]!r}") from exc


def job_json(spec: job_pb2.JobSpec) -> str:
    """The job as JobSimulation reads it: protobuf's JSON mapping with the .proto field names."""
    return json_format.MessageToJson(spec, preserving_proto_field_name=True)


@dataclass(frozen=True)
class GatlingInstall:
    """A built agent/gatling: compiled classes and the dependency classpath Maven resolved."""

    home: Path
    java: str

    @property
    def classpath(self) -> str:
        deps = (self.home / "target" / "classpath.txt").read_text().strip()
        return f"{self.home / 'target' / 'classes'}{os.pathsep}{deps}"

    @property
    def logback_config(self) -> Path:
        return self.home / "target" / "classes" / "loadfleet-logback.xml"

    def command(self, job_file: Path, results_dir: Path) -> list[str]:
        return [self.java, *JVM_OPTIONS, "-cp", self.classpath,
                f"-Dlogback.configurationFile={self.logback_config}",
                f"-Dloadfleet.job={job_file}", "-Dloadfleet.stdin_control=true",
                LAUNCHER, "-s", SIMULATION, "-rf", str(results_dir), "-nr"]


def find_gatling(home: str | None = None) -> GatlingInstall:
    """agent/gatling as built by `make gatling`: $LOADFLEET_GATLING_HOME, else the copy beside
    this package's source tree (an editable install); java from $LOADFLEET_JAVA or PATH."""
    source_tree = Path(__file__).resolve().parents[3] / "gatling"
    root = Path(home or os.environ.get(GATLING_HOME_ENV) or source_tree)
    built = root / "target" / "classes" / "loadfleet" / "gatling" / "JobSimulation.class"
    if not built.exists() or not (root / "target" / "classpath.txt").exists():
        raise EngineError(f"Gatling support is not built in {root} (run `make gatling`, or set "
                          f"${GATLING_HOME_ENV} to a built agent/gatling)")
    java = os.environ.get(JAVA_ENV) or shutil.which("java")
    if not java:
        raise EngineError(f"cannot find java 17+ for the Gatling driver (put it on PATH or set ${JAVA_ENV})")
    return GatlingInstall(home=root, java=java)


class GatlingProcess:
    """One Gatling JVM running one job; the same driver interface as EngineProcess."""

    def __init__(self, proc: asyncio.subprocess.Process, workdir: tempfile.TemporaryDirectory):
        self._proc = proc
        self._workdir = workdir
        self._tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_TAIL_LINES)
        self._stderr_task = asyncio.create_task(self._drain_stderr(), name=f"gatling-{proc.pid}-stderr")
        self.startup_s = 0.0

    @classmethod
    async def spawn(cls, install: GatlingInstall, spec: job_pb2.JobSpec) -> GatlingProcess:
        """Starts the JVM on `spec` (returns at once; then `wait_ready`)."""
        workdir = tempfile.TemporaryDirectory(prefix=f"loadfleet-gatling-{spec.job_id}-")
        job_file = Path(workdir.name) / "job.json"
        job_file.write_text(job_json(spec))
        try:
            proc = await asyncio.create_subprocess_exec(
                *install.command(job_file, Path(workdir.name) / "results"), stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, limit=STREAM_LIMIT_BYTES)
        except OSError as exc:
            workdir.cleanup()
            raise EngineError(f"cannot start {install.java}: {exc.strerror}") from exc
        return cls(proc, workdir)

    async def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Waits until the simulation is loaded (JVM start-up is a phase before load, not
        load); raises EngineError, after killing the JVM, when it fails or takes too long."""
        started = time.monotonic()
        try:
            event = await asyncio.wait_for(self.next_event(), timeout_s)
        except (TimeoutError, EngineError) as exc:
            event, problem = None, str(exc) or f"no ready event within {timeout_s:g} s"
        else:
            kind = event.WhichOneof("event") if event is not None else None
            problem = ("" if kind == "ready" else event.failed.message if kind == "failed"
                       else "it exited before the simulation started")
        if problem:
            if event is not None or self._proc.stdout.at_eof():
                # It said why, or closed stdout: let it exit by itself to report its status.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._proc.wait(), EXIT_GRACE_S)
            self.kill()
            code = await self.wait()
            raise EngineError(f"Gatling did not start the job (exit status {code}): {problem}; "
                              f"output: {self.stderr_tail()}")
        self.startup_s = time.monotonic() - started

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def start(self, spec: job_pb2.JobSpec) -> None:
        """Nothing to do: the JVM got its job at launch and starts load at the barrier."""

    async def stop(self) -> None:
        """Graceful: in-flight requests finish, the partial interval is reported."""
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._proc.stdin.write(b"stop\n")
            await self._proc.stdin.drain()

    async def next_event(self) -> engine_pb2.EngineEvent | None:
        """The next event from the hook, or None when the JVM closed its stdout."""
        while True:
            try:
                raw = await self._proc.stdout.readline()
            except ValueError as exc:  # a line longer than the stream limit
                raise EngineError(f"Gatling {self.pid} printed an overlong line: {exc}") from exc
            if not raw:
                return None
            line = raw.decode(errors="replace").rstrip("\n")
            event = parse_event_line(line)
            if event is not None:
                return event
            if line.strip():
                self._tail.append(line)
                log.debug("gatling %d: %s", self.pid, line)

    def kill(self) -> None:
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()

    async def wait(self) -> int:
        code = await self._proc.wait()
        with contextlib.suppress(asyncio.CancelledError):
            await self._stderr_task
        self._workdir.cleanup()
        return code

    def stderr_tail(self) -> str:
        return " | ".join(self._tail)

    async def _drain_stderr(self) -> None:
        async for line in self._proc.stderr:
            text = line.decode(errors="replace").rstrip()
            if text:
                self._tail.append(text)
                log.debug("gatling %d: %s", self.pid, text)
