"""Run directories for the report tests.

`synthetic_run` writes a run directory with the controller's own writer (rundir.py,
totals.py and summary.py) from made-up published intervals: two agents, two targets, connection refusals in
one interval and an agent lost. `real_run` is made by the real system: `loadfleet run
--local 1` for 2 s against an nginx, plus a target that refuses connections.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from loadfleet.controller.analysis.summary import summarize
from loadfleet.controller.analysis.totals import RunTotals
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.output import rundir
from loadfleet.targets.nginx import NginxServer
from loadfleet.v1 import stats_pb2
from loadfleet.wire.checks import CheckCount
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow
from support.procs import Processes, free_port, program
from support.streamdata import interval, window

START_MS = 1_800_000_000_000
INTERVAL_MS = 1000
N_INTERVALS = 6
AGENTS = ("agent-a", "agent-b")
TARGETS = ("http://127.0.0.2:8080", "http://127.0.0.3:8080")
LOST_AT_INTERVAL = 4  # agent-b sends nothing from here on


def _row(target: str, requests: int, latency_us: int, refused: int = 0) -> StatsRow:
    row = StatsRow(
        target,
        "home",
        requests=requests + refused,
        bytes_in=requests * 1000,
        bytes_out=requests * 100,
        connections_opened=1,
        active_connections=4,
    )
    row.status[1] = requests
    if refused:
        row.errors[stats_pb2.ERROR_KIND_CONNECT_REFUSED] = refused
    row.histogram = Histogram.of(latency_us + i % 50 for i in range(requests))
    return row


def _checked(row: StatsRow, interval_index: int) -> StatsRow:
    """`row` as a journey's: its 200s checked for the status and the page's text, which the
    first target's responses lack in the third interval (a fifth of them), as its extraction
    fails once then."""
    ok = row.status[1]
    failing = ok // 5 if interval_index == 2 and row.target == TARGETS[0] else 0
    row.checks = {
        "status": CheckCount(ok, 0),
        "welcome": CheckCount(ok - failing, failing),
        "extract csrf": CheckCount(ok - (failing > 0), int(failing > 0)),
    }
    row.checks_reported, row.reported_check_failed = True, failing
    row.users_stopped = int(failing > 0)
    return row


def write_synthetic_run(run_dir: Path, start_ms: int = START_MS, *, checks: bool = False) -> Path:
    """`checks`: its requests are a journey's, with checks (`_checked`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    writer, totals = rundir.RunDirWriter(run_dir, list(TARGETS)), RunTotals()
    step = window(start_ms=start_ms, seconds=N_INTERVALS)
    for i in range(N_INTERVALS):
        start = start_ms + i * INTERVAL_MS
        agents = {
            agent: [
                _row(TARGETS[0], 100 + 10 * i + n, 2000),
                _row(TARGETS[1], 50, 8000 + 1000 * i, refused=7 if i == 2 else 0),
            ]
            for n, agent in enumerate(AGENTS)
            if not (agent == "agent-b" and i >= LOST_AT_INTERVAL)
        }
        if checks:
            agents = {agent: [_checked(row, i) for row in rows] for agent, rows in agents.items()}
        published = interval(step, start, **{a.replace("-", "_"): rows for a, rows in agents.items()})
        published = _named_agents(published)
        writer.on_interval(published)
        totals.on_interval(published)
    events = [
        Event(EventKind.RUN_STARTED, "run synthetic started", at_ms=start_ms - 2000),
        Event(
            EventKind.AGENT_LOST,
            "agent-b lost: no heartbeat",
            agent_id="agent-b",
            at_ms=start_ms + LOST_AT_INTERVAL * INTERVAL_MS + 300,
        ),
        Event(
            EventKind.RUN_FINISHED, "run synthetic finished <done>", at_ms=start_ms + N_INTERVALS * INTERVAL_MS + 500
        ),
    ]
    for event in events:
        writer.on_event(event)
    writer.close()
    summary = summarize(
        run_id=run_dir.name,
        plan_name="synthetic <plan>",
        state="finished",
        message="",
        run_dir=str(run_dir),
        started_ms=start_ms,
        totals=totals,
        agent_ids=list(AGENTS),
        events=events,
    )
    rundir.write_summary(run_dir, summary)
    return run_dir


def _named_agents(published):
    """Agent ids with dashes (keyword arguments cannot have them)."""
    from dataclasses import replace

    return replace(published, agents=tuple(replace(a, agent_id=a.agent_id.replace("_", "-")) for a in published.agents))


@pytest.fixture
def synthetic_run(tmp_path) -> Path:
    return write_synthetic_run(tmp_path / "runs" / "20300101-000000-abcd")


@pytest.fixture
def checked_run(tmp_path) -> Path:
    """The synthetic run as a journey's, with checks."""
    return write_synthetic_run(tmp_path / "runs" / "20300101-000000-chck", checks=True)


@dataclass(frozen=True)
class RealRun:
    run_dir: Path
    summary: dict
    nginx_url: str
    refused_url: str


@pytest.fixture(scope="session")
def real_run(tmp_path_factory) -> RealRun:
    """One real 2 s run for every test that needs it (it takes ~6 s)."""
    base = tmp_path_factory.mktemp("real-run")
    docroot = base / "docroot"
    docroot.mkdir()
    (docroot / "index.html").write_text("hello " * 200)
    nginx = NginxServer("127.0.0.1", free_port(), docroot, base / "nginx", "web")
    refused_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    plan = base / "plan.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "name": "report-test",
                "duration_s": 2,
                "targets": [{"url": nginx.url, "weight": 9}, {"url": refused_url, "weight": 1}],
                "workload": {"requests": [{"name": "index", "path": "/index.html"}]},
                "load": {"model": "closed", "clients": 2},
            }
        )
    )
    processes = Processes(base)
    nginx.start()
    try:
        proc = processes.start(
            "run", [program("loadfleet"), "run", str(plan), "--local", "1", "--runs-dir", str(base / "runs")]
        )
        proc.wait(timeout=90)
        assert proc.returncode == 0, proc.log_path.read_text()
    finally:
        processes.stop_all()
        nginx.stop()
    (run_dir,) = (base / "runs").iterdir()
    return RealRun(run_dir, json.loads((run_dir / "summary.json").read_text()), nginx.url, refused_url)
