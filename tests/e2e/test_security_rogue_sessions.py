"""Rogue agents against a real controller process over real gRPC (issue 28, B7, B9, B10): an
agent outside a run writes nothing into it, a monitor flooding heartbeats leaves a run's host
files at a sample a second, and a second controller on a port in use exits with one line
while the first keeps serving. The rogue is support/rogue.py's hand-driven agent, as in the
audit (../shared/audits/red-team-2026-11-27.md, appendix); everything stays on loopback."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import time
import zipfile
from pathlib import Path

from loadfleet.v1 import agent_pb2
from support.cluster import Cluster, write_plan
from support.procs import program
from support.rogue import Rogue, now_ms


def acked(rogue: Rogue) -> int:
    """How far the controller has acknowledged the rogue's messages (its lease renewals say)."""
    return max((m.lease.ack_through_seq for m in list(rogue.received) if m.HasField("lease")), default=0)


def wait_acked(rogue: Rogue, seq: int, timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while acked(rogue) < seq:
        assert time.monotonic() < deadline, f"acknowledged through {acked(rogue)}, not {seq}"
        time.sleep(0.1)


def plan(tmp_path: Path, url: str, duration_s: int) -> Path:
    """A run for agents labelled role=load only: a rogue is never chosen."""
    return write_plan(
        tmp_path / "plan.yaml",
        name="legit",
        targets=[{"url": url}],
        workload={"requests": [{"name": "page", "path": "/manifest.json"}]},
        load={"model": "closed", "clients": 1},
        duration_s=duration_s,
        agents={"count": 1, "labels": {"role": "load"}, "wait_s": 20},
    )


def load_running(cluster: Cluster, timeout_s: float = 30) -> Path:
    """The run directory of the cluster's one run, once its first interval is written."""
    deadline = time.monotonic() + timeout_s
    while True:
        for run_dir in cluster.runs_dir.glob("2*"):
            intervals = run_dir / "intervals.csv"
            if intervals.exists() and len(intervals.read_text().splitlines()) > 1:
                return run_dir
        assert time.monotonic() < deadline, "the run's load did not start"
        time.sleep(0.2)


def report_zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("fake-1/index.html", "<html>FAKE: all targets passed</html>")
    return out.getvalue()


def finished(run: subprocess.Popen) -> dict:
    out, err = run.communicate(timeout=90)
    assert run.returncode == 0, err
    return json.loads(out)


def test_an_idle_rogue_writes_no_event_and_no_file_into_another_run(cluster, webs, tmp_path):
    cluster.add_agent("a1", 1, "--labels", "role=load")
    cluster.wait_for_agents(1)
    with Rogue.connect(cluster.address, agent_id="rogue-x", hostname="rogue") as rogue:
        run = cluster.start_run(plan(tmp_path, webs[0].url, 5))
        run_dir = load_running(cluster)
        job = run_dir.name  # a one-step run's job is the run
        rogue.send(
            engine_failure=agent_pb2.EngineFailure(
                job_id=job, engine=0, pid=1, how="killed", stderr_tail="FAKE", reported_requests=9
            )
        )
        rogue.send(
            spool_drop=agent_pb2.SpoolDrop(
                job_id=job, messages=5, reports=5, requests=123456, first_interval_ms=now_ms(), cause="FAKE"
            )
        )
        rogue.send(job_status=agent_pb2.JobStatus(job_id=job, state=agent_pb2.JOB_STATE_FAILED, message="x"))
        rogue.send(artifact=agent_pb2.Artifact(job_id=job, name="index.zip", data=report_zip(), last=True))
        last = rogue.send(artifact=agent_pb2.Artifact(job_id=job, name="partial", data=b"\0" * 3_000_000))
        wait_acked(rogue, last)  # handled (refused), while the run still runs
        assert run.poll() is None, "the rogue's messages came in while the run ran"
        summary = finished(run)

    assert [a["name"] for a in summary["agents"]] == ["a1"]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert not [e for e in events if e["kind"] in ("engine_failed", "spool_dropped", "job_failed")], events
    assert not [e for e in events if "rogue" in e["text"] or "FAKE" in e["text"]], events
    assert not (run_dir / "gatling").exists(), list(run_dir.rglob("*"))
    assert "rogue-x: engine_failure for job" in cluster.controller.log_path.read_text()


def host_rows(path: Path, host: str) -> list[dict[str, str]]:
    return [r for r in csv.DictReader(path.open()) if r["host"] == host] if path.exists() else []


def test_a_monitor_flooding_heartbeats_leaves_a_sample_a_second_in_the_run(cluster, webs, tmp_path):
    cluster.add_agent("a1", 1, "--labels", "role=load")
    cluster.wait_for_agents(1)
    processes = [agent_pb2.ProcessStats(name=f"p{i}", count=1, cpu_pct=1.0, rss_mb=10.0) for i in range(3)]
    monitor = agent_pb2.MonitorSpec(targets=["http://127.0.0.66:18080"])
    with Rogue.connect(cluster.address, agent_id="rogue-mon", monitor=monitor) as rogue:
        started = time.monotonic()
        run = cluster.start_run(plan(tmp_path, webs[0].url, 4))
        for n in range(4000):  # 100 a second, while the run lasts (at most 40 s)
            if run.poll() is not None:
                break
            counters = [agent_pb2.ServerCounter(name="haproxy.lb.FRONTEND.req_tot", value=float(n))]
            rogue.beat(host=agent_pb2.HostStats(cores=1, cpu_pct=5.0, processes=processes, counters=counters))
            time.sleep(0.01)
        summary = finished(run)
        elapsed_s = time.monotonic() - started

    run_dir = cluster.runs_dir / summary["run_id"]
    rows = host_rows(run_dir / "hosts.csv", "rogue-mon")
    samples = {r["time_ms"] for r in rows}
    # At most one a heartbeat period (1 s) and three at once, over the run's time (the audit's
    # rogue had 480 of 91 KB in 6 s written): and the monitor is still heard.
    assert 2 <= len(samples) <= elapsed_s + 3, (len(samples), elapsed_s)
    assert len(rows) == 3 * len(samples)
    assert len(host_rows(run_dir / "host_counters.csv", "rogue-mon")) <= len(samples)
    log = cluster.controller.log_path.read_text()
    assert log.count("monitored-host sample(s) dropped") == 1, log[-2000:]


def test_a_second_controller_on_a_port_in_use_exits_with_one_line_and_the_first_serves_on(cluster, processes, tmp_path):
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    second = processes.start(
        "controller-dup",
        [program("loadfleet"), "controller", "--listen", cluster.address, "--runs-dir", str(tmp_path / "dup")],
    )
    code = second.wait(timeout=20)  # before the fix it served on (SO_REUSEPORT), and this timed out
    text = second.log_path.read_text()
    assert code == 2, text
    assert text.splitlines() == [f"loadfleet: cannot listen on {cluster.address}: another process listens on that port"]
    assert not (tmp_path / "dup").exists()
    for _ in range(5):  # every new connection reaches the first controller
        listed = cluster.loadfleet("agents", "--json")
        assert listed.returncode == 0 and [a["agentId"] for a in json.loads(listed.stdout)] == ["a1"], listed
