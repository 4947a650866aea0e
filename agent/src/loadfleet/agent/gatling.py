"""Gatling as a driver: one JVM per job, running agent/gatling's JobSimulation on the job's
workload, or a simulation of the user's own project (gatling_project.py).

The JVM gets the job as a file (the JobSpec in protobuf's JSON mapping) and its share of the
load as system properties (`share_properties`). A simulation using the hook prints the same
EngineEvents as the native engine, one per stdout line after a `##loadfleet ` prefix
(agent/gatling, docs/gatling.md); one without it is followed through Gatling's console summary
(gatling_console.py: counts, no latency). Other output is kept only as a tail for error
messages. So a `GatlingProcess` offers what an `EngineProcess` does and the job merges
Gatling's intervals exactly like engines'.

Commands go to the JVM's stdin as lines: `stop` (graceful with the hook); end of stdin makes
it halt, so an agent that dies leaves no orphan load.

A journey (templates, extractions, checks, `once`, on_fail rules) reaches the JVM as the
controller made it and JobSimulation runs it as the engine does; what Gatling's libraries
would read otherwise (JSONPath filters, Rust-only regex syntax) refuses the job before a JVM
starts, as the plan's validation does (gatling_journeys.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import io
import os
import re
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import json_format

from loadfleet.v1 import engine_pb2, job_pb2
from loadfleet.wire import DEFAULT_INTERVAL_MS

from .child import ChildProcess, start_child
from .errors import EngineError, JobRefused
from .gatling_console import ConsoleCounts
from .gatling_journeys import refuse_journeys
from .gatling_project import ProjectBuild
from .scenarioshares import users_of

EVENT_PREFIX = "##loadfleet "
GATLING_HOME_ENV = "LOADFLEET_GATLING_HOME"
JAVA_ENV = "LOADFLEET_JAVA"
SIMULATION = "loadfleet.gatling.JobSimulation"
LAUNCHER = "loadfleet.gatling.Launcher"
# JVM start-up, Gatling's class loading and its warm-up request take 3-8 s here; allow slow hosts.
READY_TIMEOUT_S = 60.0
EXIT_GRACE_S = 5.0
# Gatling's line when it starts the simulation (after `before()`, where the hook says `ready`).
SIMULATION_STARTED = re.compile(r"^Simulation \S+ started\.\.\.$")
NO_HOOK_VERSION = "Gatling console summary (the simulation does not use loadfleet's hook)"
REPORT_ARTIFACT = "gatling-report.zip"
# Gatling's binary record of every request: the report is built from it, nobody reads it after.
REPORT_EXCLUDED = "simulation.log"
# Gatling settings for every job: the console summary every second (the fallback's counts) and
# no usage analytics call home. User simulations also get no warm-up request (by default aimed
# at gatling.io; JobSimulation points its own at a server inside the JVM).
GATLING_SETTINGS = {"gatling.data.console.writePeriod": "1", "gatling.data.enableAnalytics": "false"}
USER_PROJECT_SETTINGS = {"gatling.http.warmUpUrl": ""}
# The JVM options Gatling's own launchers use on Java 17.
JVM_OPTIONS = (
    "-server",
    "-XX:+HeapDumpOnOutOfMemoryError",
    "-XX:MaxInlineLevel=20",
    "-XX:MaxTrivialSize=12",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
)


def parse_event_line(line: str) -> engine_pb2.EngineEvent | None:
    """The EngineEvent on a `##loadfleet ` line; None for any other line (Gatling's own output).

    Raises EngineError when a prefixed line does not hold a valid EngineEvent."""
    if not line.startswith(EVENT_PREFIX):
        return None
    event = engine_pb2.EngineEvent()
    try:
        json_format.Parse(line[len(EVENT_PREFIX) :], event)
    except json_format.ParseError as exc:
        raise EngineError(f"the Gatling hook printed an invalid event ({exc}): {line[:200]!r}") from exc
    return event


def job_json(spec: job_pb2.JobSpec) -> str:
    """The job as JobSimulation reads it: protobuf's JSON mapping with the .proto field names."""
    text: str = json_format.MessageToJson(spec, preserving_proto_field_name=True)
    return text


def jvm_job(job: job_pb2.JobSpec, engine_specs: list[job_pb2.JobSpec]) -> job_pb2.JobSpec:
    """The job of the agent's one JVM. A plain job's load is already the agent's whole share;
    with scenarios, each scenario's load and budget are the sums of the agent's engine shares of
    it (a scenario with none stays at level 0: JobSimulation leaves it out), and its users are
    numbered from the first of them (the controller numbers an agent's engines contiguously).
    JobRefused for scenarios in a user's project, whose simulation sets its own populations."""
    if not job.scenarios or not engine_specs:
        return job
    if job.gatling.project:
        raise JobRefused(
            "a Gatling project's simulation sets its own populations; a job with scenarios "
            "runs on loadfleet's JobSimulation (leave gatling.project out)"
        )
    spec = job_pb2.JobSpec()
    spec.CopyFrom(job)
    for i, scenario in enumerate(spec.scenarios):
        shares = [e.scenarios[i].job for e in engine_specs]
        scenario.job.load.CopyFrom(summed_load([s.load for s in shares]))
        scenario.job.max_requests = sum(s.max_requests for s in shares)
        numbered = [s.first_user for s in shares if users_of(s.load) > 0]
        scenario.job.first_user = min(numbered, default=shares[0].first_user)
    return spec


def summed_load(loads: list[job_pb2.LoadShare]) -> job_pb2.LoadShare:
    """Shares of one model added up: clients, users, spawn rates, rates and stage targets
    (as the controller's scheduler.combine); think time and the rest from the first."""
    total = job_pb2.LoadShare()
    total.CopyFrom(loads[0])
    for load in loads[1:]:
        # Only the model's own fields: writing another's would switch the oneof to it.
        if total.HasField("closed"):
            total.closed.clients += load.closed.clients
        if total.HasField("users"):
            total.users.users += load.users.users
            total.users.spawn_rate_per_s += load.users.spawn_rate_per_s
        if total.HasField("open"):
            total.open.rate_per_s += load.open.rate_per_s
            total.open.max_connections += load.open.max_connections
        for stage, more in zip(total.stages, load.stages):
            stage.target += more.target
    return total


def share_properties(spec: job_pb2.JobSpec, job_file: Path) -> dict[str, str]:
    """The system properties that give a simulation its job and this JVM's share of the load
    (read by the hook, `Share.fromSystemProperties()`, or a simulation itself: docs/gatling.md)."""
    load = spec.load
    model = load.WhichOneof("model") or "closed"
    users = {"closed": load.closed.clients, "users": load.users.users}.get(model, 0)
    spawn = load.users.spawn_rate_per_s
    ramp_s = load.users.users / spawn if model == "users" and spawn > 0 else 0.0
    return {
        "loadfleet.job": str(job_file),
        "loadfleet.stdin_control": "true",
        "loadfleet.start_at_ms": str(spec.start_at_ms),
        "loadfleet.duration_ms": str(spec.duration_ms),
        "loadfleet.interval_ms": str(spec.interval_ms or DEFAULT_INTERVAL_MS),
        "loadfleet.model": model,
        "loadfleet.users": str(users),
        "loadfleet.rate": str(load.open.rate_per_s),
        "loadfleet.poisson": str(load.open.poisson).lower(),
        "loadfleet.ramp_s": str(ramp_s),
        "loadfleet.duration_s": str(spec.duration_ms / 1000),
        "loadfleet.targets": ",".join(t.url for t in spec.targets),
    }


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
    def hook_classes(self) -> Path:
        return self.home / "target" / "classes"

    @property
    def logback_config(self) -> Path:
        return self.hook_classes / "loadfleet-logback.xml"

    def command(
        self, spec: job_pb2.JobSpec, job_file: Path, results_dir: Path, project: ProjectBuild | None = None
    ) -> list[str]:
        """The JVM for `spec`: JobSimulation, or the simulation of the user's `project` (its
        classes and dependencies after the hook's, so the hook is always there)."""
        classpath, simulation, settings = self.classpath, SIMULATION, GATLING_SETTINGS
        if project is not None:
            classpath = os.pathsep.join((str(self.hook_classes), project.classpath, self.classpath))
            simulation, settings = spec.gatling.simulation, {**settings, **USER_PROJECT_SETTINGS}
        properties = {
            "logback.configurationFile": str(self.logback_config),
            **settings,
            **share_properties(spec, job_file),
        }
        report = [] if spec.gatling.html_report else ["-nr"]
        return [
            self.java,
            *JVM_OPTIONS,
            "-cp",
            classpath,
            *(f"-D{k}={v}" for k, v in properties.items()),
            LAUNCHER,
            "-s",
            simulation,
            "-rf",
            str(results_dir),
            *report,
        ]


def find_gatling(home: str | None = None) -> GatlingInstall:
    """agent/gatling as built by `make gatling`: $LOADFLEET_GATLING_HOME, else the copy beside
    this package's source tree (an editable install); java from $LOADFLEET_JAVA or PATH."""
    source_tree = Path(__file__).resolve().parents[3] / "gatling"
    root = Path(home or os.environ.get(GATLING_HOME_ENV) or source_tree)
    built = root / "target" / "classes" / "loadfleet" / "gatling" / "JobSimulation.class"
    if not built.exists() or not (root / "target" / "classpath.txt").exists():
        raise EngineError(
            f"Gatling support is not built in {root} (run `make gatling`, or set "
            f"${GATLING_HOME_ENV} to a built agent/gatling)"
        )
    java = os.environ.get(JAVA_ENV) or shutil.which("java")
    if not java:
        raise EngineError(f"cannot find java 17+ for the Gatling driver (put it on PATH or set ${JAVA_ENV})")
    return GatlingInstall(home=root, java=java)


class GatlingProcess(ChildProcess):
    """One Gatling JVM running one job; the same driver interface as EngineProcess (its pipes,
    kill and wait are a ChildProcess's; its tail takes Gatling's stdout as well as stderr)."""

    def __init__(
        self, proc: asyncio.subprocess.Process, workdir: tempfile.TemporaryDirectory[str], spec: job_pb2.JobSpec
    ):
        super().__init__(proc, label="gatling")
        self._workdir = workdir
        self._spec = spec
        self._events: collections.deque[engine_pb2.EngineEvent] = collections.deque()
        self._hooked = False
        self._console: ConsoleCounts | None = None  # set when the simulation runs without the hook
        self._in_summary = False
        self._report: bytes | None = None
        self.startup_s = 0.0

    @classmethod
    async def spawn(
        cls, install: GatlingInstall, spec: job_pb2.JobSpec, project: ProjectBuild | None = None
    ) -> GatlingProcess:
        """Starts the JVM on `spec` (returns at once; then `wait_ready`); JobRefused, with no
        JVM started, when the job holds what this driver reads otherwise than the engine."""
        refuse_journeys(spec)
        workdir = tempfile.TemporaryDirectory(prefix=f"loadfleet-gatling-{spec.job_id.replace('/', '-')}-")
        job_file = Path(workdir.name) / "job.json"
        job_file.write_text(job_json(spec))
        try:
            proc = await start_child(install.command(spec, job_file, Path(workdir.name) / "results", project))
        except EngineError:
            workdir.cleanup()
            raise
        return cls(proc, workdir, spec)

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
            problem = (
                ""
                if kind == "ready"
                else event.failed.message
                if event is not None and kind == "failed"
                else "it exited before the simulation started"
            )
        if problem:
            if event is not None or self._stdout.at_eof():
                # It said why, or closed stdout: let it exit by itself to report its status.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._proc.wait(), EXIT_GRACE_S)
            self.kill()
            code = await self.wait()
            raise EngineError(
                f"Gatling did not start the job (exit status {code}): {problem}; output: {self.stderr_tail()}"
            )
        self.startup_s = time.monotonic() - started

    def ready_message(self) -> str:
        late_ms = int(time.time() * 1000) - self._spec.start_at_ms
        late = f"; load starts {late_ms / 1000:.1f} s after the barrier" if late_ms > 0 else ""
        console = (
            (
                "; the simulation does not use loadfleet's hook: counts come from Gatling's console, "
                "latency is not measured"
            )
            if self._console
            else ""
        )
        return f"Gatling ready (JVM start-up {self.startup_s:.1f} s{late}){console}"

    async def start(self, spec: job_pb2.JobSpec) -> None:
        """Nothing to do: the JVM got its job at launch and starts load at the barrier."""

    async def stop(self) -> None:
        """Graceful with the hook: in-flight requests finish, the partial interval is reported.
        Without it the JVM ends at once and the console's last counts are the final interval."""
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._stdin.write(b"stop\n")
            await self._stdin.drain()

    async def next_event(self) -> engine_pb2.EngineEvent | None:
        """The next event (from the hook, or made from the console), or None at the end."""
        while not self._events:
            try:
                raw = await self._stdout.readline()
            except ValueError as exc:  # a line longer than the stream limit
                raise EngineError(f"Gatling {self.pid} printed an overlong line: {exc}") from exc
            if not raw:
                await self._end_of_console()
                break
            self._take(raw.decode(errors="replace").rstrip("\n"))
        return self._events.popleft() if self._events else None

    def _take(self, line: str) -> None:
        event = parse_event_line(line)
        if event is not None:
            self._hooked = self._hooked or event.WhichOneof("event") == "ready"
            self._events.append(event)
            return
        if self._console is not None:
            self._events.extend(engine_pb2.EngineEvent(interval=r) for r in self._console.feed(line))
        elif not self._hooked and SIMULATION_STARTED.match(line):
            # Gatling started the simulation and its before() printed no `ready`: no hook.
            spec = self._spec
            self._console = ConsoleCounts(
                spec.targets[0].url if spec.targets else "",
                spec.start_at_ms,
                spec.interval_ms,
                end_at_ms=spec.start_at_ms + spec.duration_ms,
            )
            self._events.append(engine_pb2.EngineEvent(ready=engine_pb2.EngineReady(version=NO_HOOK_VERSION)))
        self._keep(line)

    def _keep(self, line: str) -> None:
        """Keeps a line for error messages, unless it belongs to a console summary block."""
        if line.startswith("===="):
            self._in_summary = not self._in_summary
        elif not self._in_summary:
            self.remember(line)

    async def _end_of_console(self) -> None:
        """Without the hook, the end of output ends the intervals; a clean exit finishes the job."""
        console, self._console = self._console, None
        if console is None:
            return
        self._events.extend(engine_pb2.EngineEvent(interval=r) for r in console.finish())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._proc.wait(), EXIT_GRACE_S)
        if self._proc.returncode == 0:
            self._events.append(engine_pb2.EngineEvent(finished=engine_pb2.EngineFinished()))

    async def wait(self) -> int:
        """Its exit status, once it has ended; then its HTML report is zipped (if asked for) and
        the job's directory removed."""
        code = await super().wait()
        if self._spec.gatling.html_report and code == 0 and self._report is None:
            self._report = await asyncio.to_thread(zip_report, Path(self._workdir.name) / "results")
        self._workdir.cleanup()
        return code

    def artifacts(self) -> list[tuple[str, bytes]]:
        """Files for the run directory once the JVM has ended: Gatling's HTML report, if asked for."""
        return [(REPORT_ARTIFACT, self._report)] if self._report else []


def zip_report(results_dir: Path) -> bytes | None:
    """Gatling's report directory (`<simulation>-<time>/index.html`, ...) zipped, without the
    binary simulation.log; None when Gatling wrote no report."""
    files = [p for p in sorted(results_dir.rglob("*")) if p.is_file() and p.name != REPORT_EXCLUDED]
    if not any(p.name == "index.html" for p in files):
        return None
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(results_dir).as_posix())
    return out.getvalue()
