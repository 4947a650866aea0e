"""`loadfleet run --local N`: one command starts a controller and N agents here."""

import csv
import json
import subprocess

from support.cluster import write_plan
from support.procs import program


def test_local_run_against_nginx(webs, docroot, tmp_path):
    plan = write_plan(
        tmp_path / "plan.yaml",
        duration_s=2,
        targets=[{"url": webs[0].url}, {"url": webs[1].url}],
        workload={"manifest": str(docroot / "manifest.json")},
        load={"model": "closed", "clients": 4},
    )
    result = subprocess.run(
        [
            program("loadfleet"),
            "run",
            str(plan),
            "--local",
            "2",
            "--monitor",
            "nginx",
            "--json",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert sorted(a["name"] for a in summary["agents"]) == ["local-1", "local-2"]
    assert summary["total"]["figures"]["requests"] == sum(web.server.access_log_lines() for web in webs) > 0
    run_dir = tmp_path / "runs" / summary["run_id"]
    # The 4 clients are users from their first request to the job's end: 4 at every interval's
    # end but the last (the job over), and the step's peak.
    with (run_dir / "intervals.csv").open() as f:
        totals = [r for r in csv.DictReader(f) if r["scope"] == "cluster" and r["target"] == "*"]
    users = [int(r["users"]) for r in totals]
    assert len(users) >= 2 and users[:-1] == [4] * (len(users) - 1) and users[-1] == 0, users
    assert summary["steps"][0]["peak_users"] == 4
    # The controller watched itself: a sample a second in controller.csv, summed up in the summary.
    controller = summary["controller"]
    samples = (run_dir / "controller.csv").read_text().splitlines()[1:]
    assert controller["samples"] == len(samples) >= 2
    assert 0 <= controller["loop_lag_p50_ms"] <= controller["loop_lag_p99_ms"] <= controller["loop_lag_max_ms"]
    assert controller["agents_max"] == 3 and controller["rss_max_mb"] > 10
    assert "Controller: event-loop lag" in (run_dir / "report.html").read_text()
    # --monitor: one more local agent watched this host and its nginx processes, taking no load.
    [host] = summary["hosts"]
    assert host["host"] == "local-host" and host["targets"] == [web.url for web in webs]
    assert host["samples"] >= 1 and host["process_cpu_pct"] > 0


def test_arriving_users_walk_their_session(webs, tmp_path):
    """The open model with a session (Tsung's arrival phases), through controller and agent:
    50 users a second for 3 s, each loading a page, thinking 200 ms and loading another."""
    plan = write_plan(
        tmp_path / "arrivals.yaml",
        duration_s=3,
        targets=[{"url": webs[0].url}],
        workload={
            "requests": [{"name": "page", "path": "/manifest.json"}, {"name": "next", "path": "/next.html"}],
            "session": {"steps": [{"request": "page", "think": {"fixed_ms": 200}}, {"request": "next"}]},
        },
        load={"model": "open", "rate": 50},
    )
    result = subprocess.run(
        [program("loadfleet"), "run", str(plan), "--local", "1", "--json", "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    by_request = {r["name"]: r["figures"]["requests"] for r in summary["requests"]}
    assert by_request["page"] == 150, by_request  # every arrival's first request
    assert 130 <= by_request["next"] <= 150, by_request  # but those still thinking at the end
    assert sum(by_request.values()) == webs[0].server.access_log_lines()
    # Little's law: 50 users a second who stay about 200 ms are about 10 in progress.
    assert 8 <= summary["steps"][0]["peak_users"] <= 16, summary["steps"][0]


def test_a_user_walking_a_session_keeps_one_target_and_its_one_connection(webs, tmp_path):
    """Users spread over the targets, each on one all session long (as a Tsung user keeps its
    server): one connection per user, where re-picking per request held one per target picked."""
    session = {"steps": [{"request": "page", "think": {"fixed_ms": 50}}] * 3 + [{"request": "page"}]}
    workload = {"requests": [{"name": "page", "path": "/manifest.json"}], "session": session}
    targets = [{"url": web.url} for web in webs]
    for name, load in (
        ("arrivals", {"model": "open", "rate": 40}),
        ("clients", {"model": "closed", "clients": 6}),
    ):
        plan = write_plan(tmp_path / f"{name}.yaml", duration_s=2, targets=targets, workload=workload, load=load)
        result = subprocess.run(
            [program("loadfleet"), "run", str(plan), "--local", "1", "--json", "--runs-dir", str(tmp_path / name)],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
        by_target = {t["name"]: t["figures"] for t in summary["targets"]}
        assert all(figures["requests"] > 0 for figures in by_target.values()), by_target
        connects = summary["total"]["figures"]["phases"]["connect"]["count"]
        users = 80 if name == "arrivals" else 6  # 40 a second for 2 s; the 6 clients
        assert connects == users, (name, connects, users)
