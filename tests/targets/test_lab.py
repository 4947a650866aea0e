import json
import subprocess
import urllib.request

import pytest

from loadfleet.targets.lab import Lab, SpecError, parse_spec
from loadfleet.targets.nginx import NginxServer
from loadfleet.targets.workload import generate_tree
from support.procs import free_port, pid_alive, program

SPEC = {
    "workload": {"scale": 0.1, "seed": 2},
    "servers": [{"name": "web1", "listen": "127.0.0.2:0"}, {"name": "web2", "listen": "127.0.0.3:0"}],
}


def test_nginx_serves_tree_files_exactly_and_logs_each_request(tmp_path):
    manifest = generate_tree(tmp_path / "docroot", scale=0.1, seed=5)
    server = NginxServer("127.0.0.2", free_port("127.0.0.2"), tmp_path / "docroot", tmp_path / "state", "web")
    server.start()
    pid = server.pid
    try:
        for f in manifest.files[:5]:
            with urllib.request.urlopen(server.url + f.path) as response:
                assert response.read() == (tmp_path / "docroot" / f.path.lstrip("/")).read_bytes()
        assert server.access_log_lines() == 5
        assert server.bytes_sent() > sum(f.bytes for f in manifest.files[:5])
    finally:
        server.stop()
    assert not pid_alive(pid)


def test_only_loopback_addresses_are_accepted(tmp_path):
    with pytest.raises(ValueError, match="loopback"):
        NginxServer("10.1.2.3", 80, tmp_path, tmp_path, "web")
    with pytest.raises(SpecError) as error:
        parse_spec(
            {"servers": [{"listen": "192.168.1.1:80"}, {"listen": "nope"}, {"listen": "127.0.0.1:1", "kind": "iis"}]}
        )
    problems = error.value.problems
    assert any(p.startswith("servers[0].listen:") and "loopback" in p for p in problems)
    assert any(p.startswith("servers[1].listen:") for p in problems)
    assert any(p.startswith("servers[2].kind:") for p in problems)


def test_lab_stops_every_server_even_when_the_body_fails(tmp_path):
    with pytest.raises(RuntimeError), Lab(parse_spec(SPEC), tmp_path) as lab:
        pids = [s.pid for s in lab.servers]
        assert len(pids) == 2 and all(pid_alive(p) for p in pids)
        raise RuntimeError("test body failed")
    assert not any(pid_alive(p) for p in pids)


def test_cli_up_status_down(tmp_path):
    spec = tmp_path / "lab.yaml"
    spec.write_text(json.dumps(SPEC))  # JSON is YAML
    lab = [program("loadfleet-lab")]
    up = subprocess.run([*lab, "up", str(spec), "--state-dir", str(tmp_path / "s")], capture_output=True, text=True)
    try:
        assert up.returncode == 0, up.stderr
        assert "web1: http://127.0.0.2:" in up.stdout and "manifest" in up.stdout
        status = subprocess.run([*lab, "status", "--state-dir", str(tmp_path / "s")], capture_output=True, text=True)
        assert status.stdout.count(" up") == 2
        pids = [e["pid"] for e in json.loads((tmp_path / "s/lab.json").read_text())["servers"]]
    finally:
        down = subprocess.run([*lab, "down", "--state-dir", str(tmp_path / "s")], capture_output=True, text=True)
    assert down.returncode == 0 and "web1" in down.stdout
    assert not any(pid_alive(p) for p in pids)


def test_cli_bad_spec_exits_2_naming_the_field(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("workload: {scale: -1}\nservers: [{listen: '8.8.8.8:80'}]\n")
    result = subprocess.run(
        [program("loadfleet-lab"), "up", str(spec), "--state-dir", str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "workload.scale" in result.stderr and "servers[0].listen" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_tree_writes_a_manifest_only_tree(tmp_path):
    result = subprocess.run(
        [program("loadfleet-lab"), "tree", str(tmp_path / "d"), "--scale", "0.1", "--seed", "9"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "d/manifest.json").read_text())
    assert manifest["seed"] == 9 and len(manifest["files"]) == 36
