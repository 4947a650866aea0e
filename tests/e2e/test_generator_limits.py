"""A generator that runs out of its own resources is judged so: an agent whose engine has
too few file descriptors (a low RLIMIT_NOFILE, inherited from the agent) against a real
nginx on loopback counts LOCAL_FDS errors, and its intervals and step are invalid."""

from __future__ import annotations

import csv
import json
import subprocess

from support.cluster import write_plan

CLIENTS = 300
NOFILE = 96  # room for the agent's and the engine's own descriptors and a few dozen sockets


def test_an_engine_out_of_file_descriptors_makes_its_intervals_invalid(cluster, webs, tmp_path):
    agent = cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    subprocess.run(["prlimit", f"--pid={agent.pid}", f"--nofile={NOFILE}:{NOFILE}"], check=True)
    plan = write_plan(
        tmp_path / "plan.yaml",
        name="fds",
        duration_s=4,
        targets=[{"url": webs[0].url}],
        workload={"requests": [{"name": "page", "path": "/manifest.json"}]},
        load={"model": "closed", "clients": CLIENTS},
        agents={"wait_s": 20},
    )
    run = cluster.start_run(plan)
    out, err = run.communicate(timeout=90)
    assert run.returncode == 0 and "Traceback" not in err, err
    summary = json.loads(out)

    assert summary["total"]["errors"].get("local_fds", 0) > 0, summary["total"]["errors"]
    assert summary["total"]["errors"].get("other", 0) == 0
    [step] = summary["steps"]
    assert step["validity"] == "invalid" and step["generator_bound"], step
    assert "a1: " in step["validity_reasons"] and "no file descriptor" in step["validity_reasons"]
    assert summary["generator_bound_steps"] == ["main"]

    rows = list(csv.DictReader((cluster.runs_dir / summary["run_id"] / "intervals.csv").open()))
    totals = [r for r in rows if r["scope"] == "cluster" and r["target"] == "*" and int(r["err_local_fds"])]
    assert totals and all(r["validity"] == "invalid" and "no file descriptor" in r["validity_reasons"] for r in totals)
    steps = list(csv.DictReader((cluster.runs_dir / summary["run_id"] / "steps.csv").open()))
    assert steps[0]["validity"] == "invalid" and int(steps[0]["invalid_intervals"]) >= 1
