"""Redirects and ${agent} end to end, on real parts: `loadfleet run --local 2` (two agents,
their engines) against nginx whose `return 302` / `return 301` lines make a chain of hops, and
whose access log is the server's word on every hop. The hops the run counts are the hops nginx
served; the cookie a hop set comes back on the next; a redirect to an origin that is no target
is refused and nothing reaches that origin; and `${agent}` is 0 on one agent, 1 on the other."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from loadfleet.targets.nginx import NginxServer
from support.procs import free_port, program

pytestmark = pytest.mark.e2e

DURATION_S = 3
AGENTS = 2


@pytest.fixture
def web(tmp_path):
    """nginx on loopback: /start -> 302 (relative, with a cookie) /middle -> 301 (absolute)
    /end, which answers with the cookie it got; /away -> 302 to another loopback origin."""
    host, port = "127.0.0.2", free_port("127.0.0.2")
    elsewhere = f"http://127.0.0.3:{free_port('127.0.0.3')}/"
    conf = f"""        location = /start {{ add_header Set-Cookie "hop=7; Path=/"; return 302 /middle; }}
        location = /middle {{ return 301 http://{host}:{port}/end; }}
        location = /end {{ return 200 "arrived hop=$cookie_hop"; }}
        location = /away {{ return 302 {elsewhere}; }}
        location ~ ^/agent/([0-9]+)$ {{ return 200 "agent $1"; }}
"""
    (tmp_path / "docroot").mkdir()
    server = NginxServer(host, port, tmp_path / "docroot", tmp_path / "nginx", "web", extra_conf=conf)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def plan(tmp_path: Path, url: str) -> Path:
    doc = {
        "name": "redirects",
        "duration_s": DURATION_S,
        "targets": [{"url": url}],
        "workload": {
            "requests": [
                {
                    "name": "chain",
                    "path": "/start",
                    "redirects": 5,
                    "check": [{"name": "arrived with the cookie", "body_contains": "arrived hop=7"}],
                },
                {"name": "agent", "path": "/agent/${agent}"},
                {"name": "away", "path": "/away", "redirects": 2},
            ]
        },
        "load": {"model": "closed", "clients": 4},
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def logged(server: NginxServer, request: str, status: int) -> int:
    needle = f'"{request} HTTP/1.1" {status} '
    return sum(needle in line for line in server.access_log.read_text().splitlines())


def entry(summary: dict, name: str) -> dict:
    [found] = [e for e in summary["requests"] if e["name"] == name]
    return found


def test_hops_counted_are_the_hops_nginx_served_and_agent_is_each_agents_index(web, tmp_path):
    runs = tmp_path / "runs"
    result = subprocess.run(
        [program("loadfleet"), "run", str(plan(tmp_path, web.url)), "--local", str(AGENTS), "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=DURATION_S + 80,
    )
    [summary_path] = runs.glob("*/summary.json")
    summary = json.loads(summary_path.read_text())
    output = result.stdout[-2000:] + result.stderr[-2000:]
    starts, middles, ends = (
        logged(web, "GET /start", 302),
        logged(web, "GET /middle", 301),
        logged(web, "GET /end", 200),
    )
    assert starts > 10 and starts == middles == ends, output
    chain = entry(summary, "chain")
    assert chain["figures"]["requests"] == starts
    assert chain["figures"]["redirects"] == middles + ends, "every hop nginx served, and no other"
    assert (chain["status"]["2xx"], chain["status"]["3xx"]) == (starts, 0), "the status is the last hop's"
    arrived = chain["checks"]["arrived with the cookie"]
    assert (arrived["passed"], arrived["failed"]) == (starts, 0), "checked on the last hop, the cookie sent on"
    away = entry(summary, "away")
    assert away["errors"].get("redirect_refused") == logged(web, "GET /away", 302) > 0
    assert away["figures"]["redirects"] == 0
    assert set(away["errors"]) == {"redirect_refused"}, "refused before a connect was tried"
    assert summary["total"]["figures"]["redirects"] == middles + ends
    per_agent = [logged(web, f"GET /agent/{i}", 200) for i in range(AGENTS)]
    assert all(n > 0 for n in per_agent), per_agent
    assert sum(per_agent) == entry(summary, "agent")["figures"]["requests"], "no agent index but 0 and 1"
    intervals = (summary_path.parent / "intervals.csv").read_text().splitlines()
    assert "redirects" in intervals[0].split(",")
