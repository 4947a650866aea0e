"""A rogue agent's values on the real controller over real gRPC (issue 28: B4, B5, B6, B8):
an agent inside its own session may send any count, enum or text, and must not harm another
run, the controller or an operator's terminal. The rogue (support/rogue.py) speaks the
project's own stubs; the controller, a real agent, nginx and the CLI are processes."""

from __future__ import annotations

import json
import subprocess
import time

import grpc
import pytest

from loadfleet.v1 import agent_pb2, stats_pb2
from support.cluster import Cluster, write_plan
from support.rogue import Rogue, interval, now_ms, stats_row

U64_MAX = 2**64 - 1
OSC52 = "\x1b]52;c;ZWNobyBwd25lZAo=\x07"
FAKE = "\x1b[2J\x1b[1;31mFAKE: all targets passed\x1b[0m"


def plan(tmp_path, name: str, url: str, labels: dict[str, str], duration_s: float = 3) -> object:
    return write_plan(
        tmp_path / f"{name}.yaml",
        name=name,
        duration_s=duration_s,
        targets=[{"url": url}],
        workload={"requests": [{"name": "r", "path": "/manifest.json"}]},
        load={"model": "closed", "clients": 1},
        agents={"count": 1, "labels": labels, "wait_s": 10},
    )


def play(rogue: Rogue, hostile: dict[int, dict], *, last_words: str = "") -> str:
    """Runs the rogue's next job as an agent would, on the controller's grid: RUNNING, one
    report a second of 10 requests (a row and its `*`/`*` total; in second i, `hostile[i]`
    overrides both rows' fields), FINISHED. `last_words`: an engine failure's stderr first."""
    job = rogue.next_assignment(timeout_s=30)
    spec = job.spec
    job_id, target, request = spec.job_id, spec.targets[0].url, spec.requests[0].name
    running = agent_pb2.JobStatus(job_id=job_id, state=agent_pb2.JOB_STATE_RUNNING, message="go\x1b[2J")
    rogue.send(job_status=running)
    if last_words:
        failure = agent_pb2.EngineFailure(job_id=job_id, engine=0, pid=1, how="killed\x1b[8m", stderr_tail=last_words)
        rogue.send(engine_failure=failure)
    n = spec.duration_ms // spec.interval_ms
    for i in range(n):
        start_ms = spec.start_at_ms + i * spec.interval_ms
        time.sleep(max(0.0, (start_ms + spec.interval_ms - now_ms()) / 1000))
        over = hostile.get(i, {})
        rows = [stats_row(target, request, 10, **over), stats_row("*", "*", 10, **over)]
        rogue.send(interval=interval(job_id, start_ms, rows, interval_ms=spec.interval_ms, final=i == n - 1))
    rogue.send(job_status=agent_pb2.JobStatus(job_id=job_id, state=agent_pb2.JOB_STATE_FINISHED))
    return job_id


def finish(run: subprocess.Popen, timeout_s: float = 60) -> tuple[dict, str]:
    out, err = run.communicate(timeout=timeout_s)
    assert "Traceback" not in err, err
    return (json.loads(out) if out.strip() else {}), err


def runs_listed(cluster: Cluster) -> list[dict]:
    result = cluster.loadfleet("runs", "--json")
    assert result.returncode == 0, f"`loadfleet runs` failed: {result.stderr}"
    return json.loads(result.stdout)


def no_escape(text: str, where: str) -> None:
    assert "\x1b" not in text and "\\u001b" not in text.lower() and "\x07" not in text, f"an ESC reached {where}"


@pytest.fixture
def legit(cluster: Cluster):
    """A real agent, selected by role=legit."""
    cluster.add_agent("legit", 1, "--labels", "role=legit")
    cluster.wait_for_agents(1)
    return cluster


def test_a_report_of_uint64_max_is_refused_and_runs_stay_listed(legit, webs, tmp_path):
    """B4: 2^64 - 1 requests failed the run with an internal error and `loadfleet runs` for
    everyone until a restart. Now the report is refused, the run concludes with the rogue's
    other reports, and every listing works; the rogue's texts reach no console raw (B8)."""
    cluster = legit
    with Rogue.connect(cluster.address, agent_id="rogue-max", labels={"rogue": "yes"}) as rogue:
        other = cluster.start_run(plan(tmp_path, "legit", webs[0].url, {"role": "legit"}, duration_s=4))
        run = cluster.start_run(plan(tmp_path, "rogue", webs[0].url, {"rogue": "yes"}))
        play(rogue, {1: {"requests": U64_MAX, "status_2xx": U64_MAX}}, last_words=f"panicked\n{OSC52}{FAKE}\n")
        summary, console = finish(run)
    assert summary.get("state") in ("finished", "failed"), f"no summary: {console[-2000:]}"
    assert "internal error" not in summary["message"] and "out of range" not in console
    assert summary["total"]["figures"]["requests"] == 20, "the rogue's two sound reports, not its third"
    run_dir = cluster.runs_dir / summary["run_id"]
    assert (run_dir / "summary.json").exists()
    no_escape(console, "the run's console")
    no_escape((run_dir / "events.jsonl").read_text(), "events.jsonl")
    assert "FAKE: all targets passed" in (run_dir / "events.jsonl").read_text()  # the text is kept, harmless
    assert "report refused" in cluster.controller.log_path.read_text()

    other_summary, err = finish(other)
    assert other.returncode == 0 and other_summary["state"] == "finished", err
    listed = {r["runId"]: r for r in runs_listed(cluster)}
    assert {summary["run_id"], other_summary["run_id"]} <= set(listed)
    assert int(listed[summary["run_id"]]["requests"]) == 20


def test_an_unknown_error_kind_is_refused_and_the_run_concludes(legit, webs, tmp_path):
    """B5: ErrorKind 999 made the summary raise: no summary.json, `loadfleet run` hung."""
    cluster = legit
    with Rogue.connect(cluster.address, agent_id="rogue-kind", labels={"rogue": "yes"}) as rogue:
        run = cluster.start_run(plan(tmp_path, "rogue", webs[0].url, {"rogue": "yes"}))
        unknown = {"status_2xx": 3, "errors": [stats_pb2.ErrorCount(kind=999, count=7)]}
        play(rogue, {1: unknown})
        summary, console = finish(run, timeout_s=45)
    assert run.returncode == 0 and summary["state"] == "finished", console
    assert summary["total"]["figures"]["requests"] == 20
    assert (cluster.runs_dir / summary["run_id"] / "summary.json").exists()
    assert "kind 999, which is no ErrorKind" in cluster.controller.log_path.read_text()
    runs_listed(cluster)


def test_a_hello_claiming_a_million_cores_is_refused_at_once_and_another_run_is_untouched(legit, webs, tmp_path):
    """B6: 1,000,000 cores stalled the controller 8.8 s; another run's agent lost its lease."""
    cluster = legit
    other = cluster.start_run(plan(tmp_path, "legit", webs[0].url, {"role": "legit"}, duration_s=5))
    time.sleep(3)  # the other run is under way
    for cores in (1_000_000, 2**32 - 1):
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            Rogue.connect(cluster.address, agent_id="rogue-cores", cores=cores, labels={"rogue": "yes"})
        assert time.monotonic() - started < 2
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "more than the 1,024 engines" in refused.value.details()
    assert "rogue-cores" not in cluster.loadfleet("agents", "--json").stdout
    summary, err = finish(other)
    assert other.returncode == 0 and summary["state"] == "finished", err
    kinds = {e["kind"] for e in summary["events"]}
    assert not kinds & {"controller_stalled", "job_failed", "loss_policy", "agent_lost"}, kinds
    assert summary["duration_s"] >= 4.5
    # An agent within the bound joins.
    with Rogue.connect(cluster.address, agent_id="rogue-cores", cores=1024):
        assert "rogue-cores" in cluster.loadfleet("agents", "--json").stdout


def test_no_escape_in_a_hello_reaches_loadfleet_agents(cluster):
    """B8: `loadfleet agents` printed an agent's host name, version, labels and allow-list raw."""
    hello = {
        "agent_id": "rogue-esc",
        "hostname": "h\x1b[31mRED\x1b[0m",
        "version": "0.1.0\x1b]0;owned\x07",
        "labels": {"zone\x1b[2J": "eu\x1b[1;31m\nFAKE: passed"},
        "allow_targets": ["127.0.0.66/32" + OSC52],
    }
    with Rogue.connect(cluster.address, **hello):
        table = cluster.loadfleet("agents")
        listed = cluster.loadfleet("agents", "--json")
    assert table.returncode == 0 and listed.returncode == 0, table.stderr + listed.stderr
    no_escape(table.stdout, "`loadfleet agents`")
    no_escape(listed.stdout, "`loadfleet agents --json`")
    assert "hRED" in table.stdout
    (agent,) = json.loads(listed.stdout)
    assert (agent["hostname"], agent["version"]) == ("hRED", "0.1.0")
    assert agent["labels"] == {"zone": "eu FAKE: passed"} and agent["allowTargets"] == ["127.0.0.66/32"]
