"""The controller's runs directory on a small tmpfs that fills up mid-run: the run goes on
and ends, its totals whole (what nginx served), followers hear of the full disk (an event
naming it) and get the summary, the files written as far as they were complete, and the
summary lists what is incomplete. `loadfleet run` exits 1: its results are not whole. The
controller's InfluxDB spool on the same disk drops and counts what it cannot write."""

from __future__ import annotations

import csv
import json
import re
import time

import pytest

from support.cluster import Cluster, write_plan
from support.procs import free_port
from support.tmpfs import fill, small_disk

pytestmark = pytest.mark.e2e


@pytest.fixture
def disk(tmp_path):
    with small_disk(tmp_path / "disk", 2048) as mount:
        yield mount


def run_until_disk_full(processes, tmp_path, disk, webs, docroot, *, duration_s: int, controller_args=()):
    cluster = Cluster(
        processes, tmp_path, runs_dir=disk / "runs", controller_args=controller_args
    )  # the controller's runs on the small disk
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    plan = write_plan(
        tmp_path / "plan.yaml",
        name="full-disk",
        duration_s=duration_s,
        targets=[{"url": webs[0].url, "weight": 3}, {"url": webs[1].url, "weight": 1}],
        workload={"manifest": str(docroot / "manifest.json")},
        load={"model": "closed", "clients": 2},
    )
    run = cluster.start_run(plan)
    run_id = run.stderr.readline().split()[1]
    published = 0
    while published < 2:
        published += run.stderr.readline()[:2].isdigit()
    filler = fill(disk, leave_bytes=24_576)  # a few seconds of this run's files
    told = []
    while not told:  # the followers hear of it as it happens
        line = run.stderr.readline()
        assert line, "the run ended without a disk_full event"
        told += [line] if line.startswith("-- disk_full") else []
    return cluster, run, run_id, filler, told[0]


def check_clean_prefix(run_dir) -> list[int]:
    """intervals.csv holds whole intervals, from the first on; returns their starts."""
    rows = list(csv.DictReader((run_dir / "intervals.csv").open()))
    assert all(None not in r and r["max_ms"] not in (None, "") for r in rows), "every line whole"
    starts = sorted({int(r["interval_start_ms"]) for r in rows})
    assert starts == list(range(starts[0], starts[0] + 1000 * len(starts), 1000))
    return starts


def test_a_disk_that_stays_full_ends_the_run_with_its_summary_to_the_followers(
    processes, webs, docroot, tmp_path, disk
):
    cluster, run, run_id, _, told = run_until_disk_full(processes, tmp_path, disk, webs, docroot, duration_s=10)
    assert f"the disk of {disk}/runs/{run_id} (tmpfs mounted at {disk}" in told and "is full" in told
    out, err = run.communicate(timeout=60)
    assert run.returncode == 1, err
    summary = json.loads(out)
    assert summary["state"] == "finished"
    assert summary["total"]["figures"]["requests"] == sum(web.server.access_log_lines() for web in webs), (
        "the totals are whole: they live in memory"
    )
    assert {"intervals.csv", "summary.json"} <= set(summary["incomplete_files"])
    assert f"the disk of {disk}/runs/{run_id}" in summary["message"] and "incomplete" in summary["message"]
    run_dir = cluster.runs_dir / run_id
    assert not (run_dir / "summary.json").exists() and not list(run_dir.rglob("*.tmp"))
    assert len(check_clean_prefix(run_dir)) < 10
    listed = json.loads(cluster.loadfleet("runs", "--json").stdout)
    assert [(r["runId"], r["state"]) for r in listed] == [(run_id, "RUN_STATE_FINISHED")], "the controller goes on"
    logged = cluster.controller.log_path.read_text()
    assert logged.count(f"the disk of {disk}/runs/{run_id} (tmpfs mounted at {disk}") == 1, "one log line names it"


def test_room_made_before_the_end_gives_a_summary_that_lists_the_incomplete_files(
    processes, webs, docroot, tmp_path, disk
):
    cluster, run, run_id, filler, _ = run_until_disk_full(processes, tmp_path, disk, webs, docroot, duration_s=10)
    time.sleep(1)
    filler.unlink()  # the operator makes room while the run goes on
    out, err = run.communicate(timeout=60)
    assert run.returncode == 1, err
    run_dir = cluster.runs_dir / run_id
    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk == json.loads(out)
    # Which of the files appended as the run goes hit the full disk first is a matter of timing.
    appended = {"intervals.csv", "latency.hlog", "events.jsonl", "journal/intervals.log", "journal/run.jsonl"}
    assert set(on_disk["incomplete_files"]) & appended and "summary.json" not in on_disk["incomplete_files"]
    assert f"the disk of {disk}/runs/{run_id}" in on_disk["message"]
    assert [e["kind"] for e in on_disk["events"]].count("disk_full") == 1
    assert on_disk["total"]["figures"]["requests"] == sum(web.server.access_log_lines() for web in webs)
    # intervals.csv is whole (10 intervals) unless it is listed as incomplete: then it was cut
    # short and written no more. Which file meets the full disk first is a matter of timing.
    intervals = len(check_clean_prefix(run_dir))
    if "intervals.csv" in on_disk["incomplete_files"]:
        assert intervals < 10, "a file cut short is written no more"
    else:
        assert intervals == 10, "a file not listed as incomplete is whole"
    assert (run_dir / "report.html").exists()


def test_the_influxdb_spool_on_the_full_disk_drops_and_counts_and_the_run_completes(
    processes, webs, docroot, tmp_path, disk
):
    down = f"http://127.0.0.1:{free_port()}"  # an InfluxDB that is not there: every point goes to the spool
    cluster, run, run_id, _, _ = run_until_disk_full(
        processes, tmp_path, disk, webs, docroot, duration_s=8, controller_args=("--influx-url", down)
    )
    out, err = run.communicate(timeout=90)
    assert run.returncode == 1, err
    summary = json.loads(out)
    assert summary["state"] == "finished"
    assert summary["total"]["figures"]["requests"] == sum(web.server.access_log_lines() for web in webs)
    drops = [e for e in summary["events"] if e["kind"] == "spool_dropped"]
    assert drops and any("No space left on device" in e["text"] for e in drops), summary["events"]
    assert all(re.match(r"[\d,]+ InfluxDB points dropped from the controller's spool", e["text"]) for e in drops)
    assert [e["kind"] for e in summary["events"]].count("disk_full") == 1
    listed = json.loads(cluster.loadfleet("runs", "--json").stdout)
    assert [(r["runId"], r["state"]) for r in listed] == [(run_id, "RUN_STATE_FINISHED")]
