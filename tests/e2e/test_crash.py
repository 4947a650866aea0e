"""A controller that dies mid-run: what was published is on disk, a restarted controller
closes the run as interrupted, or (restarted within the agents' lease) takes it over and
finishes it with counts equal to what nginx served."""

from __future__ import annotations

import csv
import itertools
import json
import os
import signal
import subprocess
import time

import pytest

from support.cluster import write_plan
from support.procs import pid_alive, program

pytestmark = pytest.mark.e2e


def plan(tmp_path, webs, docroot, *, duration_s: int, **agents):
    return write_plan(
        tmp_path / "plan.yaml",
        name="crash",
        duration_s=duration_s,
        targets=[{"url": webs[0].url, "weight": 3}, {"url": webs[1].url, "weight": 1}],
        workload={"keep_alive": True, "manifest": str(docroot / "manifest.json")},
        load={"model": "closed", "clients": 4},
        agents={"wait_s": 20, **agents},
    )


def published_before(run: subprocess.Popen, n: int) -> tuple[str, list[dict]]:
    """Reads `loadfleet run --json`'s progress until `n` intervals were published."""
    run_id = run.stderr.readline().split()[1]  # "run <id> started on ..."
    lines = []
    while len(lines) < n:
        line = run.stderr.readline()
        assert line, "the run ended early"
        if line[:2].isdigit():  # "HH:MM:SS  agents  req/s ..."
            lines.append(line.split())
    return run_id, lines


def cluster_rows(run_dir) -> list[dict]:
    return [
        r for r in csv.DictReader((run_dir / "intervals.csv").open()) if r["scope"] == "cluster" and r["target"] == "*"
    ]


def wait_for_summary(run_dir, timeout_s: float = 90) -> dict:
    deadline = time.monotonic() + timeout_s
    while not (run_dir / "summary.json").exists():
        assert time.monotonic() < deadline, f"no summary.json in {run_dir}"
        time.sleep(0.2)
    return json.loads((run_dir / "summary.json").read_text())


def test_a_killed_controller_leaves_every_published_interval_and_a_restart_closes_the_run(
    cluster, webs, docroot, tmp_path
):
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    run = cluster.start_run(plan(tmp_path, webs, docroot, duration_s=30))
    run_id, seen = published_before(run, 5)
    os.killpg(cluster.controller.pid, signal.SIGKILL)
    run.communicate(timeout=30)
    assert run.returncode == 1
    run_dir = cluster.runs_dir / run_id
    on_disk = cluster_rows(run_dir)
    assert len(on_disk) >= len(seen), "every interval published before the crash is on disk"
    # The same intervals: a progress line's req/s is its interval's requests (1 s intervals).
    assert [int(r["requests"]) for r in on_disk[: len(seen)]] == [round(float(s[2])) for s in seen]
    assert not (run_dir / "summary.json").exists()

    time.sleep(9)  # past the agent's 3 s lease and the slack: its job has stopped for good
    cluster.start_controller()
    summary = wait_for_summary(run_dir)
    assert summary["state"] == "interrupted" and "the controller stopped" in summary["message"]
    assert summary["total"]["figures"]["requests"] == sum(int(r["requests"]) for r in cluster_rows(run_dir))
    assert summary["steps"][0]["state"] == "interrupted"
    listed = json.loads(cluster.loadfleet("runs", "--json").stdout)
    assert [(r["runId"], r["state"]) for r in listed] == [(run_id, "RUN_STATE_INTERRUPTED")]
    report = subprocess.run([program("loadfleet"), "report", str(run_dir)], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    compare = subprocess.run(
        [program("loadfleet"), "compare", str(run_dir), str(run_dir), "--out", str(tmp_path / "c.html")],
        capture_output=True,
        text=True,
    )
    assert compare.returncode == 0, compare.stderr


def test_a_controller_restarted_within_the_lease_takes_the_run_over_and_counts_exactly(
    cluster, webs, docroot, tmp_path
):
    for agent_id in ("a1", "a2"):
        cluster.add_agent(agent_id)
    cluster.wait_for_agents(2)
    run = cluster.start_run(plan(tmp_path, webs, docroot, duration_s=12, lease_s=30))
    run_id, _ = published_before(run, 3)
    os.killpg(cluster.controller.pid, signal.SIGKILL)
    run.communicate(timeout=30)
    time.sleep(1.5)
    cluster.start_controller()
    follow = subprocess.run(
        [program("loadfleet"), "status", run_id, "--controller", cluster.address, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    summary = json.loads(follow.stdout)
    assert follow.returncode == 0, follow.stderr
    assert summary["state"] == "finished", summary["message"]
    kinds = [e["kind"] for e in summary["events"]]
    assert "run_recovered" in kinds and "agent_lost" not in kinds
    served = sum(web.server.access_log_lines() for web in webs)
    assert summary["total"]["figures"]["requests"] == served, "every request counted once, none twice"
    rows = cluster_rows(cluster.runs_dir / run_id)
    starts = [int(r["interval_start_ms"]) for r in rows]
    assert len(starts) == 12 and all(b - a == 1000 for a, b in itertools.pairwise(starts)), "no gap, no duplicate"
    assert all(r["agent"] == "" for r in rows)
    per_agent = [
        r
        for r in csv.DictReader((cluster.runs_dir / run_id / "intervals.csv").open())
        if r["scope"] == "agent" and r["target"] == "*"
    ]
    assert len(per_agent) == 24, "each agent's report of each interval, once"


def test_a_job_no_controller_claims_stops_when_its_lease_ends(cluster, webs, docroot, tmp_path):
    """The agent reconnects to a controller that knows nothing of its job (another runs
    directory): that controller renews the agent's session, never the job's lease."""
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    run = cluster.start_run(plan(tmp_path, webs, docroot, duration_s=60, lease_s=6))
    published_before(run, 2)
    engines = cluster.engine_pids("a1")
    os.killpg(cluster.controller.pid, signal.SIGKILL)
    run.communicate(timeout=30)
    killed = time.monotonic()
    cluster.runs_dir = tmp_path / "other-runs"
    cluster.start_controller()
    cluster.wait_for_agents(1)
    while any(pid_alive(pid) for pid in engines):
        assert time.monotonic() - killed < 6 + 3, (
            "load went on past its lease for a controller that does not collect it"
        )
        time.sleep(0.2)
    assert pid_alive(cluster.agents["a1"].pid), "the agent itself stays, connected"
    assert json.loads(cluster.loadfleet("agents", "--json").stdout)[0]["state"] == "AGENT_STATE_IDLE"
