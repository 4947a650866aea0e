"""A plan with two scenarios through a real in-process controller, one hand agent playing the
engines (issue 31 S4, S8, S9): the job an agent gets (a ScenarioSpec each, its shares of each),
and every output of the run per scenario (intervals.csv, checks.csv, steps.csv, latency.hlog,
events, summary.json, report.html, the run API). An agent without the capability `scenarios`
is not given the plan."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path

import grpc
import pytest

from loadfleet.controller.cli.client import RunClient
from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.rpc.server import ControllerServer
from loadfleet.controller.service.controller import Controller
from loadfleet.v1 import agent_pb2, run_pb2, stats_pb2
from loadfleet.wire.checks import CheckCount
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import TOTAL, StatsRow, total_row
from support.handsession import HandSession

WEB, API = "http://127.0.0.2:9", "http://127.0.0.3:9"
PLAN = f"""
name: two-populations
duration_s: 4
targets:
  - {{name: web, url: "{WEB}"}}
  - {{name: api, url: "{API}"}}
scenarios:
  - name: browse
    targets: [web]
    workload:
      requests:
        - {{name: home, path: /, check: [{{name: welcome, body_contains: hello}}]}}
    load: {{model: closed, clients: 3}}
  - name: buy
    targets: [api]
    start_after_s: 1
    duration_s: 2
    workload: {{requests: [{{name: pay, method: POST, path: /pay}}]}}
    load: {{model: open, rate: 5}}
    budget: {{requests: 10}}
agents: {{count: 1, wait_s: 10}}
"""
INTERVALS = 4


def rows(second: int) -> list[StatsRow]:
    """browse in every interval; buy from 1 s to 3 s, as its span."""
    home = StatsRow(WEB, "home", scenario="browse", requests=10, status=[0, 10, 0, 0, 0])
    home.histogram = Histogram.of([1000 + 100 * i for i in range(10)])
    home.checks = {"welcome": CheckCount(passed=9, failed=1)}
    home.users = 3
    if not 1 <= second < 3:
        return [home]
    pay = StatsRow(API, "pay", scenario="buy", requests=5, status=[0, 5, 0, 0, 0])
    pay.histogram = Histogram.of([20_000 + 1000 * i for i in range(5)])
    return [home, pay]


def interval(seq: int, job_id: str, start_ms: int, second: int) -> agent_pb2.AgentMessage:
    parts = rows(second)
    total = total_row(parts)
    total.scenario = TOTAL  # the agent's total over scenarios (agent job.py)
    report = stats_pb2.IntervalReport(
        interval_start_ms=start_ms,
        interval_ms=1000,
        final=second == INTERVALS - 1,
        stats=[r.to_proto() for r in (*parts, total)],
    )
    return agent_pb2.AgentMessage(seq=seq, interval=agent_pb2.AgentInterval(job_id=job_id, report=report))


async def scenario_run(runs_dir: Path) -> tuple[agent_pb2.Assignment, list[run_pb2.RunUpdate], str]:
    server = ControllerServer(Controller(runs_dir=runs_dir), "127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel, RunClient(server.address) as client:
            agent = HandSession(channel)
            await agent.hello(agent_id="agent-1", capabilities=("engine", "scenarios"))
            started = await client.start_run(PLAN)
            heard = asyncio.Event()
            watching = asyncio.create_task(followed(client, started.run_id, heard))  # live, as the CLI follows
            await asyncio.wait_for(heard.wait(), 10)  # following before the first interval is published
            assignment = (await agent.until("assignment")).assignment
            spec = assignment.spec
            for second in range(INTERVALS):
                await agent.call.write(interval(second + 1, spec.job_id, spec.start_at_ms + 1000 * second, second))
            finished = agent_pb2.JobStatus(job_id=spec.job_id, state=agent_pb2.JOB_STATE_FINISHED)
            await agent.call.write(agent_pb2.AgentMessage(seq=INTERVALS + 1, job_status=finished))
            await agent.acked_through(INTERVALS + 1)
            return assignment, await asyncio.wait_for(watching, 30), started.run_id
    finally:
        await server.stop()


async def followed(client: RunClient, run_id: str, heard: asyncio.Event) -> list[run_pb2.RunUpdate]:
    updates = []
    async for update in client.watch(run_id):
        updates.append(update)
        heard.set()
        if update.HasField("finished"):
            break
    return updates


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    runs_dir = tmp_path_factory.mktemp("runs")
    assignment, updates, run_id = asyncio.run(scenario_run(runs_dir))
    return assignment, updates, runs_dir / run_id


def test_the_job_carries_each_scenario_with_its_own_workload_timing_and_share(ran):
    assignment, _, _ = ran
    browse, buy = assignment.spec.scenarios
    assert (browse.name, [t.url for t in browse.job.targets], [r.name for r in browse.job.requests]) == (
        "browse",
        [WEB],
        ["home"],
    )
    assert browse.job.requests[0].checks[0].name == "welcome"
    assert (browse.start_after_ms, browse.job.duration_ms) == (0, 4000)  # to the run's end
    assert (buy.name, [t.url for t in buy.job.targets], buy.start_after_ms, buy.job.duration_ms) == (
        "buy",
        [API],
        1000,
        2000,
    )
    assert not assignment.spec.requests and not assignment.spec.targets  # all of it is in the scenarios
    (engine,) = assignment.engines
    shares = {s.scenario: s for s in engine.scenarios}
    assert shares[0].load.closed.clients == 3 and shares[1].load.open.rate_per_s == 5
    assert shares[1].max_requests == 10 and buy.job.max_requests == 10


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_intervals_csv_has_a_row_per_scenario_and_each_scenarios_total(ran):
    _, _, run_dir = ran
    cluster = [r for r in read_csv(run_dir / "intervals.csv") if r["scope"] == "cluster"]
    keys = {(r["scenario"], r["target"], r["request"]) for r in cluster}
    assert keys == {
        ("browse", WEB, "home"),
        ("buy", API, "pay"),
        ("browse", "*", "*"),
        ("buy", "*", "*"),
        ("*", "*", "*"),
    }
    totals = [r for r in cluster if r["scenario"] == "*"]
    assert [int(r["requests"]) for r in totals] == [10, 15, 15, 10]
    assert sum(int(r["requests"]) for r in cluster if (r["scenario"], r["target"]) == ("buy", "*")) == 10
    agent = {(r["scenario"], r["target"]) for r in read_csv(run_dir / "intervals.csv") if r["scope"] == "agent"}
    assert ("buy", "*") in agent and ("*", "*") in agent
    checks = read_csv(run_dir / "checks.csv")
    assert {(r["scenario"], r["check"]) for r in checks} == {("browse", "welcome")}
    hlog = (run_dir / "latency.hlog").read_text()
    assert "Tag=scenario:buy," in hlog and "Tag=scenario:browse," in hlog


def test_steps_summary_events_and_report_name_each_scenario(ran):
    _, _, run_dir = ran
    steps = read_csv(run_dir / "steps.csv")
    assert [r["scenario"] for r in steps] == ["*", "browse", "buy"]
    assert int(steps[1]["requests"]) + int(steps[2]["requests"]) == int(steps[0]["requests"])
    summary = json.loads((run_dir / "summary.json").read_text())
    by_name = {s["name"]: s for s in summary["scenarios"]}
    assert by_name["buy"]["total"]["figures"]["requests"] == 10
    assert by_name["browse"]["total"]["figures"]["requests"] == 40
    assert by_name["buy"]["budget"] == 10 and by_name["buy"]["start_after_s"] == 1
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    told = [(e["kind"], e.get("scenario")) for e in events if e.get("scenario")]
    assert told == [
        ("scenario_started", "browse"),
        ("scenario_started", "buy"),
        ("scenario_ended", "buy"),
        ("scenario_ended", "browse"),
    ]
    assert all("scenario" not in e for e in events if not e["kind"].startswith("scenario"))
    report = (run_dir / "report.html").read_text()
    assert "<h2>Scenarios</h2>" in report and "Requests/s by scenario" in report


def test_the_run_api_gives_each_scenarios_figures_live_and_at_the_end(ran):
    _, updates, _ = ran
    live = [u.interval for u in updates if u.HasField("interval")]
    assert [[s.name for s in i.scenarios] for i in live] == [
        ["browse"],
        ["browse", "buy"],
        ["browse", "buy"],
        ["browse"],
    ]
    assert live[1].scenarios[1].requests == 5 and live[1].scenarios[0].users == 3
    (finished,) = [u.finished for u in updates if u.HasField("finished")]
    assert [(t.name, t.requests) for t in finished.scenarios] == [("browse", 40), ("buy", 10)]
    started = [u.event for u in updates if u.HasField("event") and u.event.scenario]
    assert started[0].kind == run_pb2.EVENT_KIND_SCENARIO_STARTED


async def refused(runs_dir: Path) -> Exception:
    server = ControllerServer(Controller(runs_dir=runs_dir), "127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel, RunClient(server.address) as client:
            await HandSession(channel).hello(agent_id="old-agent")  # no `scenarios` capability
            with pytest.raises(PlanError) as exc:
                await client.start_run(PLAN)
            return exc.value
    finally:
        await server.stop()


def test_an_agent_without_scenarios_is_not_given_the_plan(tmp_path):
    error = asyncio.run(refused(tmp_path))
    assert [p.path for p in error.problems] == ["scenarios"]
    assert "old-agent" in error.problems[0].message and "without scenarios" in error.problems[0].message
