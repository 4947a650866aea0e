"""Target monitoring on real parts: a monitor-only agent next to nginx reports the host and
the nginx processes; a sweep's steps carry the server's CPU, which grows with the load,
and the monitor never takes load itself."""

from __future__ import annotations

import csv
import json

import pytest

from support.cluster import write_plan


def test_a_sweep_shows_the_servers_cpu_next_to_its_load(cluster, webs, tmp_path):
    web = webs[0]
    pid_file = tmp_path / "web1.pid"
    pid_file.write_text(str(web.server.pid))
    cluster.add_agent("a1")
    cluster.add_agent(
        "web1-host", 1, "--monitor", f"--target={web.url}", f"--pid-file=nginx={pid_file}", "--interfaces=lo"
    )
    cluster.wait_for_agents(2)
    listing = cluster.loadfleet("agents")
    assert f"monitors {web.url}" in listing.stdout, listing.stdout

    plan = write_plan(
        tmp_path / "plan.yaml",
        name="monitored",
        targets=[{"url": web.url}],
        workload={"requests": [{"name": "page", "path": "/manifest.json"}]},
        load={"model": "open"},
        sweep={"steps": [50, 4000], "step_s": 5, "warmup_s": 1},
        agents={"wait_s": 20},
    )
    run = cluster.start_run(plan)
    out, err = run.communicate(timeout=90)
    assert run.returncode == 0, err
    summary = json.loads(out)

    # The monitor is no load agent: the run took only a1, even with `agents.count` unset (all idle).
    assert [a["name"] for a in summary["agents"]] == ["a1"]
    [host] = summary["hosts"]
    assert host["host"] == "web1-host" and host["targets"] == [web.url]
    assert host["samples"] >= 3 and 0 < host["cpu_pct"] <= 100
    # The load went over loopback, which it was told to count (with whatever else the machine
    # sends there: only the process figures are the server's own).
    assert host["net_rx_mb_per_s"] > 0

    low, high = summary["steps"]
    [low_host], [high_host] = low["hosts"], high["hosts"]
    assert low_host["samples"] >= 2 and high_host["samples"] >= 2
    # nginx (one worker) serves many times the requests at the second step: its CPU must show it.
    assert high["ok_rps"] > 10 * low["ok_rps"]
    assert high_host["process_cpu_pct"] > max(2 * low_host["process_cpu_pct"], low_host["process_cpu_pct"] + 3), (
        low_host,
        high_host,
    )

    run_dir = cluster.runs_dir / summary["run_id"]
    rows = list(csv.DictReader((run_dir / "hosts.csv").open()))
    assert {r["host"] for r in rows} == {"web1-host"} and {r["process"] for r in rows} == {"nginx"}
    assert all(int(r["process_count"]) == 2 for r in rows[1:])  # the master and its one worker
    steps = list(csv.DictReader((run_dir / "steps.csv").open()))
    assert float(steps[1]["server_cpu_pct web1-host"]) == pytest.approx(high_host["process_cpu_pct"], abs=0.01)
    assert "Monitored hosts" in (run_dir / "report.html").read_text()
