"""A lab spec gives HAProxy its client-side protocol (`front`) and balancing `mode` (issue 32):
`loadfleet-lab up` builds the h2c front a plan can load, not only a test constructing the server."""

from __future__ import annotations

import json
import subprocess

import pytest

from loadfleet.targets.lab import Lab, parse_spec
from loadfleet.targets.spec import SpecError
from support.cluster import write_plan
from support.procs import program

HOST = "127.0.0.2"
WEBS = [{"name": "web1", "listen": f"{HOST}:0"}, {"name": "web2", "listen": f"{HOST}:0"}]


def lb(**fields) -> dict:
    return {"name": "lb", "kind": "haproxy", "backends": ["web1", "web2"], "listen": f"{HOST}:0", **fields}


def test_front_and_mode_are_kept_and_default_to_http1_over_http():
    servers = {s.name: s for s in parse_spec({"servers": [*WEBS, lb(front="h2c", mode="http")]}).servers}
    assert (servers["lb"].front, servers["lb"].mode) == ("h2c", "http")
    plain = {s.name: s for s in parse_spec({"servers": [*WEBS, lb()]}).servers}
    assert (plain["lb"].front, plain["lb"].mode) == ("http1", "http")


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"front": "h3"}, "servers[2].front: 'h3' must be one of http1, h2, h2c"),
        ({"front": "nginx"}, "servers[2].front: 'nginx' must be one of http1, h2, h2c"),
        ({"mode": "udp"}, "servers[2].mode: 'udp' must be one of http, tcp"),
        ({"mode": "tcp", "front": "h2"}, "servers[2].front: a mode tcp haproxy passes bytes through"),
    ],
)
def test_a_bad_front_or_mode_is_named_by_field(fields, problem):
    with pytest.raises(SpecError) as error:
        parse_spec({"servers": [*WEBS, lb(**fields)]})
    assert any(p.startswith(problem) for p in error.value.problems), error.value.problems


def test_a_php_front_is_still_a_web_server():
    with pytest.raises(SpecError, match=r"servers\[0\].front: 'h2c' must be one of"):
        parse_spec({"servers": [{"kind": "php", "front": "h2c", "listen": f"{HOST}:0"}]})


@pytest.mark.process
def test_a_lab_spec_h2c_front_is_loaded_over_h2c(open_dir):
    spec = parse_spec({"workload": {"kind": "single"}, "servers": [*WEBS, lb(front="h2c")]})
    with Lab(spec, open_dir / "lab") as lab:
        front = lab.server("lb")
        plan = write_plan(
            open_dir / "plan.yaml",
            duration_s=1,
            targets=[{"url": front.url, "protocol": "h2c", "max_streams": 4}],
            workload={"requests": [{"name": "page", "path": "/single.html"}]},
            load={"model": "closed", "clients": 4},
        )
        argv = [program("loadfleet"), "run", str(plan), "--local", "1", "--json", "--runs-dir", str(open_dir / "runs")]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
        total = json.loads(done.stdout)["total"]
        lines = front.access_lines()
    assert total["errors"] == {}, total
    assert lines and all(line.startswith("access HTTP/2.0 200 ") for line in lines), lines[:3]
    assert total["figures"]["requests"] == len(lines)


def test_an_mtls_nginx_is_a_spec_field_and_no_balancer_backend():
    servers = {
        s.name: s for s in parse_spec({"servers": [{"name": "web1", "mtls": True, "listen": f"{HOST}:0"}]}).servers
    }
    assert servers["web1"].mtls
    with pytest.raises(SpecError, match=r"servers\[0\].mtls: 'yes' must be true or false"):
        parse_spec({"servers": [{"mtls": "yes", "listen": f"{HOST}:0"}]})
    with pytest.raises(SpecError, match="'web1' serves https"):
        parse_spec({"servers": [{"name": "web1", "mtls": True, "listen": f"{HOST}:0"}, {**lb(), "backends": ["web1"]}]})
