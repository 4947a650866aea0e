"""The files a Docker user starts from: the compose stack is valid, and every dashboard
points at the provisioned datasource."""

import json
import subprocess

import pytest
import yaml

from loadfleet.wire.allowlist import AllowList, Verdict
from support.procs import REPO

pytestmark = pytest.mark.process  # runs docker-compose (tests/conftest.py)


def test_compose_file_is_valid():
    result = subprocess.run(
        ["docker-compose", "-f", str(REPO / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr


def test_dashboards_use_the_provisioned_datasource():
    provisioned = yaml.safe_load((REPO / "dashboards/provisioning/datasources/influxdb.yaml").read_text())
    uid = provisioned["datasources"][0]["uid"]
    dashboards = sorted((REPO / "dashboards").glob("*.json"))
    assert dashboards
    for path in dashboards:
        dashboard = json.loads(path.read_text())
        refs = [p["datasource"]["uid"] for p in dashboard["panels"]]
        refs += [t["datasource"]["uid"] for p in dashboard["panels"] for t in p["targets"]]
        refs += [v["datasource"]["uid"] for v in dashboard["templating"]["list"]]
        assert set(refs) == {uid}, path.name


def compose_config() -> dict:
    result = subprocess.run(
        ["docker-compose", "-f", str(REPO / "docker-compose.yml"), "config"], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_the_compose_stack_serves_tls_and_every_member_has_its_certificate():
    services = compose_config()["services"]
    made = services["certs"]["command"][0]
    command = services["controller"]["command"]
    assert {"--tls-cert", "--tls-key", "--tls-ca"} <= set(command) and "--insecure" not in command
    issued = {f"agent-{name}" for name in made.split("certs agent --dir /pki ")[1].split(" &&")[0].split()}
    issued |= {"operator-cli", "controller"}
    agents = {name: s for name, s in services.items() if s.get("image") == "loadfleet-agent"}
    assert len(agents) == 6
    for name, service in [*agents.items(), ("cli", services["cli"])]:
        env, args = service.get("environment", {}), service.get("command", [])
        cert = env.get("LOADFLEET_TLS_CERT") or args[args.index("--tls-cert") + 1]
        ca = env.get("LOADFLEET_TLS_CA") or args[args.index("--tls-ca") + 1]
        assert ca == "/pki/ca.crt" and cert.removeprefix("/pki/").removesuffix(".crt") in issued, name


def test_the_compose_agents_may_load_the_compose_plans_targets_and_nothing_else():
    services = compose_config()["services"]
    lists = {
        name: AllowList.parse(s["environment"]["LOADFLEET_ALLOW_TARGETS"])
        for name, s in services.items()
        if "LOADFLEET_ALLOW_TARGETS" in s.get("environment", {})
    }
    assert sorted(lists) == ["agent1", "agent2", "agent3"]
    for plan in ("compose.yaml", "compose-lb.yaml"):
        for target in yaml.safe_load((REPO / "plans" / plan).read_text())["targets"]:
            assert all(allow.verdict(target["url"]) is Verdict.ALLOWED for allow in lists.values()), target
    assert all(allow.verdict("http://10.0.0.1:80") is Verdict.REFUSED for allow in lists.values())


def engine_stage(dockerfile: str) -> str:
    text = (REPO / dockerfile).read_text()
    return text[text.index("FROM rust:") : text.index("\nFROM python:")]


def test_images_install_the_engine_wheel_built_by_one_shared_stage():
    """loadfleet-agent depends on loadfleet-engine: both images that install the agent build
    that wheel with maturin in the same stage (so Docker's cache builds it once)."""
    stages = [engine_stage(name) for name in ("agent/Dockerfile", "targets/Dockerfile")]
    assert stages[0] == stages[1]
    assert "maturin build --release --locked" in stages[0]
    assert "--manifest-path proto/native/Cargo.toml" in stages[0], "loadfleet-proto's histogram loops"
    for name in ("agent/Dockerfile", "targets/Dockerfile"):
        installs = (
            "pip install --no-cache-dir /wheels/loadfleet_engine-*.whl /wheels/loadfleet_buckets-*.whl ./proto ./agent"
        )
        assert installs in (REPO / name).read_text()
    assert "/wheels/loadfleet_buckets-*.whl ./proto ./controller" in (REPO / "controller/Dockerfile").read_text()
