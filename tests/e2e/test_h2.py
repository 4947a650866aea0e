"""HTTP/2 end to end (issue 32), on real parts: `loadfleet run --local` loads nginx over h2
(TLS, ALPN) and h2c (cleartext, prior knowledge); what the run counts equals what nginx
logged, and nginx's log shows every request came in HTTP/2.0. A server's stream limit shows as
the queueing phase, and active streams stay within it. An HTTP/1.1-only nginx given
`h2c` makes the run count h2_protocol errors, on the console too, and exit 4 rather than 0 in
silence (the error sample's words, "does not speak h2c", are tested in the engine's tests/h2.rs:
samples do not reach the run directory yet)."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest

from loadfleet.targets.nginx import NginxServer
from support.cluster import write_plan
from support.procs import free_port, program

pytestmark = pytest.mark.process

HOST = "127.0.0.2"


@pytest.fixture
def h2_nginx(docroot, tmp_path):
    """nginx with h2 over TLS, and another with h2c, on loopback."""
    started = []
    try:
        for name, tls in (("h2", True), ("h2c", False)):
            server = NginxServer(HOST, free_port(HOST), docroot, tmp_path / "nginx", name, tls=tls, http2=True)
            server.start()
            started.append(server)
        yield started
    finally:
        for server in started:
            server.stop()


def run_local(plan: Path, tmp_path: Path, code: int = 0) -> tuple[dict, str]:
    argv = [program("loadfleet"), "run", str(plan), "--local", "1", "--json", "--runs-dir", str(tmp_path / "runs")]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=90)
    assert result.returncode == code, result.stderr
    return json.loads(result.stdout), result.stderr


def test_h2_and_h2c_counts_equal_nginx_logs(h2_nginx, tmp_path):
    tls, clear = h2_nginx
    plan = write_plan(
        tmp_path / "plan.yaml",
        duration_s=2,
        targets=[
            {"url": f"https://{HOST}:{tls.port}", "protocol": "h2", "max_streams": 4},
            {"url": f"http://{HOST}:{clear.port}", "protocol": "h2c"},
        ],
        workload={"requests": [{"name": "page", "path": "/manifest.json"}]},
        load={"model": "closed", "clients": 8},
    )
    summary, _ = run_local(plan, tmp_path)
    total = summary["total"]
    assert total["errors"] == {}, total
    for server in h2_nginx:
        lines = server.access_log.read_text().splitlines()
        assert lines, server.name
        # "$request" is "GET /manifest.json HTTP/2.0" for a request that came over HTTP/2.
        assert all('HTTP/2.0"' in line for line in lines), f"{server.name}: {lines[0]}"
    logged = sum(server.access_log_lines() for server in h2_nginx)
    assert total["figures"]["requests"] == logged > 50


def test_h2c_to_an_http1_server_is_a_protocol_error_that_says_why(docroot, tmp_path):
    server = NginxServer(HOST, free_port(HOST), docroot, tmp_path / "nginx", "h1")
    server.start()
    try:
        plan = write_plan(
            tmp_path / "plan.yaml",
            duration_s=1,
            targets=[{"url": f"http://{HOST}:{server.port}", "protocol": "h2c"}],
            workload={"requests": [{"name": "page", "path": "/manifest.json"}]},
            load={"model": "closed", "clients": 2},
        )
        # Exit 4: the default threshold (some response was ok) failed, as it should.
        summary, console = run_local(plan, tmp_path, code=4)
    finally:
        server.stop()
    total = summary["total"]
    requests = total["figures"]["requests"]
    assert requests > 0
    assert total["errors"] == {"h2_protocol": requests}, total
    assert f"h2_protocol {requests:,}" in console


# The limited server's run judges its queueing: a threshold that fails (exit 4) on what the
# 1-stream limit makes clients wait, read from the queueing phase end to end.
QUEUEING_LIMIT = {"metric": "queueing", "stat": "mean", "below_ms": 0.05}


def h2_run(server: NginxServer, tmp_path: Path, max_streams: int, *, tls: bool) -> tuple[dict, list[dict[str, str]]]:
    """8 closed-model clients sharing h2 connections (`max_streams` 8 or more), over TLS (ALPN)
    or h2c: the summary, and intervals.csv's cluster total rows."""
    scheme, protocol = ("https", "h2") if tls else ("http", "h2c")
    plan = write_plan(
        tmp_path / f"plan-{protocol}-{max_streams}.yaml",
        duration_s=1.5,
        targets=[{"url": f"{scheme}://{HOST}:{server.port}", "protocol": protocol, "max_streams": max_streams}],
        workload={"requests": [{"name": "page", "path": "/manifest.json"}]},
        load={"model": "closed", "clients": 8},
        thresholds=[QUEUEING_LIMIT],
    )
    runs = tmp_path / f"runs-{protocol}-{max_streams}"
    argv = [program("loadfleet"), "run", str(plan), "--local", "1", "--json", "--runs-dir", str(runs)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=90)
    summary = json.loads(result.stdout)
    # exit 4 exactly when a threshold did not pass (failed, or inconclusive: generator-bound intervals)
    passed = all(t["outcome"] == "passed" for t in summary["thresholds"])
    assert result.returncode == (0 if passed else 4), result.stderr[-2000:]
    (intervals,) = runs.glob("*/intervals.csv")
    with intervals.open() as f:
        rows = [r for r in csv.DictReader(f) if r["scope"] == "cluster" and r["target"] == "*"]
    return summary, rows


def phases_of(summary: dict) -> tuple[dict, float]:
    figures = summary["total"]["figures"]
    return figures["phases"], figures["latency"]["mean_ms"]


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-over-tls"])
def test_a_servers_stream_limit_is_queueing_and_streams_stay_within_it(docroot, tmp_path, tls):
    """nginx allowing 1 stream per connection: 8 clients sharing a connection wait for it in
    `queueing` (most of their latency), never more than 1 stream is open per connection at an
    interval's end; with streams to spare (max_streams 100, nginx's 128) nothing queues. The
    phases add up to no more than the latency either way, and the plan's queueing threshold fails
    on the limited server only. Over h2c and over TLS (ALPN chooses h2)."""
    one_stream = "        http2_max_concurrent_streams 1;\n"
    place = tmp_path / "nginx"
    limited = NginxServer(HOST, free_port(HOST), docroot, place, "one", tls=tls, http2=True, extra_conf=one_stream)
    free = NginxServer(HOST, free_port(HOST), docroot, place, "many", tls=tls, http2=True)
    try:
        limited.start()
        free.start()
        queued, queued_rows = h2_run(limited, tmp_path, max_streams=8, tls=tls)
        spare, spare_rows = h2_run(free, tmp_path, max_streams=100, tls=tls)
    finally:
        limited.stop()
        free.stop()
    for summary in (queued, spare):
        assert summary["total"]["errors"] == {}, summary["total"]
        phases, mean_ms = phases_of(summary)
        names = ("queueing", "connect", "tls", "waiting", "receiving")
        assert phases["queueing"]["count"] == phases["responses"] > 20, phases
        assert sum(phases[n]["per_response_ms"] for n in names) <= mean_ms * 1.01, phases
    (phases, mean_ms), (spare_phases, _) = phases_of(queued), phases_of(spare)
    queueing_ms = phases["queueing"]["per_response_ms"]
    assert queueing_ms > 0.4 * mean_ms, f"{queueing_ms} ms of {mean_ms} ms queued behind 1 stream"
    assert spare_phases["queueing"]["per_response_ms"] < 0.25 * queueing_ms, spare_phases
    # The threshold reads the queueing phase: over its limit behind 1 stream, under it with many
    # (judged, unless a busy machine made a tenth of the intervals the generator's limit).
    (limited_q, spare_q) = [next(t for t in s["thresholds"] if "queueing" in t["text"]) for s in (queued, spare)]
    assert limited_q["value"] > QUEUEING_LIMIT["below_ms"] > spare_q["value"], (limited_q, spare_q)
    assert limited_q["outcome"] in ("failed", "inconclusive") and spare_q["outcome"] in ("passed", "inconclusive")
    if tls:  # every request went over TLS: its handshakes are in the tls phase
        assert phases["tls"]["count"] > 0 and spare_phases["tls"]["count"] > 0
    for rows, per_connection in ((queued_rows, 1), (spare_rows, 100)):
        assert rows
        assert all(int(r["active_streams"]) <= int(r["active_conns"]) * per_connection for r in rows), rows
    # The clients of an engine share a connection: most of the time a stream is in flight on
    # it, and with streams to spare several are.
    assert max(int(r["active_streams"]) for r in queued_rows) >= 1
    assert max(int(r["active_streams"]) for r in spare_rows) > max(int(r["active_conns"]) for r in spare_rows)
