"""A plan without scenarios writes exactly what it wrote before scenarios existed (design
docs/proposals/scenarios.md §11): one plain run, driven by a hand agent against a real
in-process controller, compared file by file with golden/plain/, captured before any
scenario change. Times and ids differ from run to run, so the test replaces them with
fixed words first (`normalised`); everything else must match byte for byte.

To capture the files again after a change that is meant to show in plain runs:
LOADFLEET_GOLDEN_WRITE=1 pytest tests/controller/output/test_plain_outputs_unchanged.py"""

from __future__ import annotations

import asyncio
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import grpc

from loadfleet.controller.cli.client import RunClient
from loadfleet.controller.rpc.server import ControllerServer
from loadfleet.controller.service.controller import Controller
from loadfleet.v1 import agent_pb2, stats_pb2
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow, total_row
from support.handsession import HandSession

GOLDEN = Path(__file__).parent / "golden" / "plain"
TARGET = "http://127.0.0.2:9"
PLAN = f"""
name: golden-plain
duration_s: 4
targets: [{{url: "{TARGET}"}}]
workload:
  requests:
    - {{name: home, path: /}}
    - {{name: search, path: /search}}
load: {{model: closed, clients: 2}}
agents: {{count: 1, wait_s: 10}}
"""
INTERVALS = 4


def rows(second: int) -> list[StatsRow]:
    """One interval's rows: two requests, a 5xx and a transport error among them, latencies
    that grow with the second so percentiles differ per interval."""
    home = StatsRow(TARGET, "home", requests=10 + second, status=[0, 10 + second, 0, 0, 0])
    home.histogram = Histogram.of([1000 * (i + 1) + 100 * second for i in range(10 + second)])
    search = StatsRow(TARGET, "search", requests=6, status=[0, 4, 0, 0, 1], errors={1: 1})
    search.histogram = Histogram.of([5000 + 700 * i + 300 * second for i in range(5)])
    search.users = home.users = 1
    search.active_connections = home.active_connections = 1
    return [home, search]


def interval(seq: int, job_id: str, start_ms: int, second: int) -> agent_pb2.AgentMessage:
    parts = rows(second)
    report = stats_pb2.IntervalReport(
        interval_start_ms=start_ms,
        interval_ms=1000,
        final=second == INTERVALS - 1,
        stats=[r.to_proto() for r in (*parts, total_row(parts))],
    )
    return agent_pb2.AgentMessage(seq=seq, interval=agent_pb2.AgentInterval(job_id=job_id, report=report))


async def one_plain_run(runs_dir: Path) -> tuple[str, int]:
    """Runs PLAN with one hand agent to its end; the run's id and its start (ms)."""
    server = ControllerServer(Controller(runs_dir=runs_dir), "127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel, RunClient(server.address) as client:
            agent = HandSession(channel)
            await agent.hello(agent_id="agent-1")
            started = await client.start_run(PLAN)
            spec = (await agent.until("assignment")).assignment.spec
            for second in range(INTERVALS):
                await agent.call.write(interval(second + 1, spec.job_id, spec.start_at_ms + 1000 * second, second))
            finished = agent_pb2.JobStatus(job_id=spec.job_id, state=agent_pb2.JOB_STATE_FINISHED)
            await agent.call.write(agent_pb2.AgentMessage(seq=INTERVALS + 1, job_status=finished))
            await agent.acked_through(INTERVALS + 1)
            async for update in client.watch(started.run_id):
                if update.HasField("finished"):
                    break
            return started.run_id, spec.start_at_ms
    finally:
        await server.stop()


# Times in the outputs: epoch milliseconds (13 digits), epoch seconds with milliseconds (the
# hlog's 10.3 digits) and UTC date-times of the report.
_EPOCH = re.compile(r"\b(\d{13})\b|\b(\d{10})\.(\d{3})\b")
_DATETIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC")
_SINCE_START = re.compile(r"<td>-?[\d.]+ s</td><td>T~</td>")


def _relative(at_ms: int, start_ms: int) -> str:
    """A time as its offset from the run's start when it is on the interval grid (the load's
    times, the same in every run); `T~` otherwise: the wall-clock times of control events
    (run started, finished), which come before the start at the barrier and vary by a few ms."""
    offset = at_ms - start_ms
    return f"T{offset:+d}" if offset >= 0 and offset % 1000 == 0 else "T~"


def normalised(text: str, *, run_id: str, run_dir: Path, start_ms: int) -> str:
    """`text` with the run's id, directory and times replaced by fixed words (see the module)."""
    text = text.replace(str(run_dir), "RUNDIR").replace(run_id, "RUN")

    def epoch(match: re.Match[str]) -> str:
        millis, seconds, fraction = match.groups()
        return _relative(int(millis) if millis else int(seconds) * 1000 + int(fraction), start_ms)

    def datetime_utc(match: re.Match[str]) -> str:
        at = datetime.strptime(match.group(0), "%Y-%m-%d %H:%M:%S.%f UTC").replace(tzinfo=UTC)
        return _relative(round(at.timestamp() * 1000), start_ms)

    text = _DATETIME.sub(datetime_utc, _EPOCH.sub(epoch, text))
    return _SINCE_START.sub("<td>~</td><td>T~</td>", text)


def test_a_plain_run_writes_exactly_the_golden_files(tmp_path):
    run_id, start_ms = asyncio.run(one_plain_run(tmp_path))
    run_dir = tmp_path / run_id
    written = {
        str(path.relative_to(run_dir)): normalised(path.read_text(), run_id=run_id, run_dir=run_dir, start_ms=start_ms)
        for path in sorted(run_dir.rglob("*"))
        if path.is_file()
    }
    if os.environ.get("LOADFLEET_GOLDEN_WRITE"):
        for name, text in written.items():
            (GOLDEN / name).parent.mkdir(parents=True, exist_ok=True)
            (GOLDEN / name).write_text(text)
    golden = {str(p.relative_to(GOLDEN)): p.read_text() for p in sorted(GOLDEN.rglob("*")) if p.is_file()}
    assert sorted(written) == sorted(golden)
    for name, text in written.items():
        assert text == golden[name], f"{name} differs from golden/plain/{name}"


def test_the_normalisation_keeps_grid_times_and_hides_only_wall_clock_ones():
    text = "run r-1 in /x/r-1 at 1700000003000 and 1700000001234; hlog 1700000004.000; 2023-11-14 22:13:22.000 UTC"
    out = normalised(text, run_id="r-1", run_dir=Path("/x/r-1"), start_ms=1_700_000_002_000)
    assert out == "run RUN in RUNDIR at T+1000 and T~; hlog T+2000; T+0"
