"""A target that stops answering mid-run, on real parts: one of two nginx is stopped by
PID (its connections are then refused) and started again on the same port; the run marks
it down with the load it had, up again when it answers, and finishes normally."""

from __future__ import annotations

import json
import re
import time

from support.cluster import write_plan
from support.procs import free_port

DOWN_S = 4  # long enough for two whole silent intervals whatever the phase


def wait_until(check, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.1)


def test_a_stopped_target_is_down_then_up_and_the_run_finishes(cluster, webs, tmp_path):
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    healthy, failing = webs
    plan = write_plan(
        tmp_path / "plan.yaml",
        name="target-failure",
        duration_s=10,
        targets=[{"url": healthy.url}, {"url": failing.url}],
        workload={"requests": [{"name": "page", "path": "/manifest.json"}]},
        load={"model": "open", "rate": 200, "max_connections": 16},
    )
    run = cluster.start_run(plan)
    try:
        wait_until(lambda: failing.server.access_log_lines() > 100, timeout_s=15)  # ~1 s of its load
        failing.server.stop()
        time.sleep(DOWN_S)
        failing.server.start()
        out, err = run.communicate(timeout=40)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, err  # no stop condition in the plan: failures do not end the run
    summary = json.loads(out)
    assert summary["state"] == "finished"

    (outage,) = summary["target_outages"]
    assert outage["target"] == failing.url and outage["step"] == "main" and outage["offered"] == "200/s"
    assert outage["rps_before"] > 0 and outage["up_ms"] is not None
    assert 2 <= outage["down_s"] <= DOWN_S + 1
    assert outage["failed"] > 0 and set(outage["errors"]) <= {"connect_refused", "reset"}

    targeted = [e for e in summary["events"] if e["kind"] in ("target_down", "target_up")]
    assert [e["kind"] for e in targeted] == ["target_down", "target_up"]
    down, up = targeted
    assert down["text"].startswith(f"target {failing.url} down at ") and "connect_refused" in down["text"]
    assert up["text"].startswith(f"target {failing.url} up again after ")
    assert (down["at_ms"], up["at_ms"]) == (outage["down_ms"], outage["up_ms"])
    assert healthy.url not in down["text"] + up["text"]
    for event in targeted:  # the console showed both as they happened
        assert f"-- {event['kind']}: {event['text']}" in err
    report = (cluster.runs_dir / summary["run_id"] / "report.html").read_text()
    assert "target_down" in report and "target_up" in report


def test_a_target_nobody_listens_on_is_named_as_the_target_s_failure_not_the_generator_s(cluster, tmp_path):
    """Every connect refused at once: the engines spin on cheap failures, yet the step is not
    generator-bound, no agent is advised, and the finding names the refused connects and the
    target's address (issue 33, item 4). The exit code is the verdict's (not asserted here)."""
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    port = free_port("127.0.0.2")  # bound and released: nobody listens on it
    plan = write_plan(
        tmp_path / "plan.yaml",
        name="dead-target",
        duration_s=3,
        targets=[{"url": f"http://127.0.0.2:{port}"}],
        workload={"requests": [{"name": "page", "path": "/"}]},
        load={"model": "closed", "clients": 4},
    )
    run = cluster.start_run(plan)
    try:
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert "Traceback" not in err, err
    summary = json.loads(out)
    assert summary["total"]["errors"].get("connect_refused", 0) > 0, summary["total"]
    [step] = summary["steps"]
    assert step["validity"] == "suspect" and not step["generator_bound"], step
    finding = f"connects refused by 127.0.0.2:{port}"
    assert step["validity_reasons"].startswith("the target failed: ") and finding in step["validity_reasons"]
    assert step["generator_advice"].startswith("step main: the target failed: ")
    assert summary.get("generator_bound_steps", []) == []
    assert "SUSPECT: the target failed: " in err and finding in err  # the progress lines say it
    for text in (out, err):
        assert not re.search(r"add about \d+ more agent", text, re.IGNORECASE), text
    assert "generator_bound" not in [e["kind"] for e in summary["events"]]
