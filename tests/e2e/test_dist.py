"""An installable load host: the wheels `make dist` built, installed into a fresh virtualenv
on a PATH without cargo, give a working agent and its engine. A real controller gives that
agent a job against a real nginx on loopback, and every request nginx logged is counted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import psutil
import pytest

from support.cluster import Cluster, write_plan
from support.procs import REPO

pytestmark = pytest.mark.e2e

DIST = REPO / "dist"
WHEELS = (
    "loadfleet_proto",
    "loadfleet_buckets",
    "loadfleet_agent",
    "loadfleet_engine",
    "loadfleet_controller",
    "loadfleet_targets",
)
# What a bare load host has: the system's programs, no Rust toolchain, no project venv.
BARE_PATH = "/usr/local/bin:/usr/bin:/bin"


def built_wheels() -> dict[str, Path]:
    found = {path.name.split("-")[0]: path for path in DIST.glob("*.whl")}
    missing = [name for name in WHEELS if name not in found]
    if missing:
        pytest.fail(f"no {', '.join(missing)} wheel in {DIST}: run `make dist` (part of `make test`)")
    return found


def test_the_engine_wheel_is_a_platform_wheel_carrying_the_program():
    engine = built_wheels()["loadfleet_engine"]
    assert "-py3-none-manylinux_" in engine.name and engine.name.endswith("_x86_64.whl"), engine.name
    with zipfile.ZipFile(engine) as wheel:
        program = wheel.getinfo("loadfleet_engine-0.1.0.data/scripts/loadfleet-engine")
        assert program.file_size > 1_000_000, "the compiled engine, not a launcher script"
        assert not [n for n in wheel.namelist() if n.endswith(".py")], "nothing but the program"
    with zipfile.ZipFile(built_wheels()["loadfleet_agent"]) as wheel:
        metadata = wheel.read("loadfleet_agent-0.1.0.dist-info/METADATA").decode()
    assert "Requires-Dist: loadfleet-engine==0.1.0" in metadata


def test_the_histogram_loops_come_as_one_wheel_for_every_cpython_from_3_11():
    buckets = built_wheels()["loadfleet_buckets"]
    assert "-cp311-abi3-manylinux_" in buckets.name, buckets.name
    with zipfile.ZipFile(built_wheels()["loadfleet_proto"]) as wheel:
        metadata = wheel.read("loadfleet_proto-0.1.0.dist-info/METADATA").decode()
    assert "Requires-Dist: loadfleet-buckets==0.1.0" in metadata


def test_the_controller_wheel_carries_its_schema_and_the_reports_chart_library():
    with zipfile.ZipFile(built_wheels()["loadfleet_controller"]) as wheel:
        names = set(wheel.namelist())
    assert {
        "loadfleet/controller/plan/plan.schema.json",
        "loadfleet/controller/output/report/charts.js",
        "loadfleet/controller/output/report/vendor/uPlot.iife.min.js",
        "loadfleet/controller/output/report/vendor/uPlot.min.css",
        "loadfleet/controller/output/report/vendor/LICENSE",
    } <= names
    # Every module sits in its room: one left at the top is an earlier build's (setuptools' build/lib).
    stray = sorted(n for n in names if n.count("/") == 2 and n.endswith(".py") and not n.endswith("/__init__.py"))
    assert not stray, stray


def test_a_fresh_virtualenv_without_cargo_runs_a_job_with_the_installed_engine(processes, webs, tmp_path):
    built_wheels()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOADFLEET_", "VIRTUAL_ENV", "CARGO", "RUSTUP"))}
    env["PATH"] = BARE_PATH
    assert shutil.which("cargo", path=BARE_PATH) is None, "this PATH must not offer cargo"
    host = tmp_path / "load-host"
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", str(host)], check=True, env=env, timeout=120)
    # Only our wheels come from dist/ (--no-index for them would also cut off grpcio & co):
    # --only-binary keeps pip from building anything of ours from source.
    installed = subprocess.run(
        [
            str(host / "bin" / "pip"),
            "install",
            "-q",
            "--disable-pip-version-check",
            "--find-links",
            str(DIST),
            "--only-binary",
            "loadfleet-agent,loadfleet-engine,loadfleet-proto,loadfleet-buckets",
            "loadfleet-agent",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    engine = host / "bin" / "loadfleet-engine"
    assert engine.is_file() and os.access(engine, os.X_OK), "the engine wheel put the program beside python"
    absent = subprocess.run(
        [str(host / "bin" / "python"), "-c", "import loadfleet.controller"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert absent.returncode != 0, "a load host gets the agent, not the controller"

    cluster = Cluster(processes, tmp_path)  # the controller and the CLI come from the project's venv
    agent = processes.start(
        "dist-agent",
        [
            str(host / "bin" / "loadfleet-agent"),
            "--controller",
            cluster.address,
            "--id",
            "dist-1",
            "--cores",
            "1",
            "--spool-dir",
            str(tmp_path / "spool"),
        ],
        env=env,
    )
    try:
        cluster.wait_for_agents(1, timeout_s=20)
    except TimeoutError:
        pytest.fail(f"the installed agent did not connect: {agent.log_path.read_text()[-3000:]}")
    plan = write_plan(
        tmp_path / "plan.yaml",
        name="from-wheels",
        duration_s=2,
        agents={"wait_s": 20},
        targets=[{"url": webs[0].url}],
        workload={"requests": [{"name": "index", "path": "/"}]},
        load={"model": "closed", "clients": 2},
    )
    run = cluster.start_run(plan)
    engines = engine_programs(agent.pid, deadline_s=20)
    out, err = run.communicate(timeout=90)
    assert run.returncode == 0, err
    summary = json.loads(out)
    assert engines == {str(engine)}, "the agent ran the engine the wheel installed"
    assert summary["state"] == "finished" and [a["name"] for a in summary["agents"]] == ["dist-1"]
    assert summary["total"]["figures"]["requests"] == webs[0].server.access_log_lines() > 0


def engine_programs(agent_pid: int, deadline_s: float) -> set[str]:
    """The programs of the agent's engine processes, once some run (before the job ends)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = set()
        for child in psutil.Process(agent_pid).children(recursive=True):
            try:
                if child.name() == "loadfleet-engine":
                    found.add(child.exe())
            except psutil.NoSuchProcess:
                continue
        if found:
            return found
        time.sleep(0.05)
    return set()
