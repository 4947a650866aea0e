"""The systemd units of deploy/systemd: systemd itself finds them valid and well confined, they
hold what a service on a fleet needs, and their command lines, run as systemd would run them
with the shipped environment files, make a controller serving TLS and an agent that joins it
with its labels and allow-list."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from support.pki import make_pki
from support.procs import REPO, free_port, program, wait_for_port
from support.unitfile import Unit, command_line, read_environment_file, read_unit

UNITS = REPO / "deploy" / "systemd"
SERVICES = ("loadfleet-controller.service", "loadfleet-agent.service")
INSTALLED_BIN = "/opt/loadfleet/bin/"
PKI = "/etc/loadfleet/pki"
# systemd-analyze's exposure score, 0 (locked) to 10 (unconfined); the units score 1.5 and 1.7 here.
MAX_EXPOSURE = 2.5


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.fail("systemd-analyze is missing (make system-deps installs systemd)")
    return found


def units_with_this_venv(tmp_path: Path) -> list[Path]:
    """The units as installed here: ExecStart names this venv's programs instead of /opt/loadfleet."""
    out = []
    for name in SERVICES:
        path = tmp_path / name
        path.write_text((UNITS / name).read_text().replace(INSTALLED_BIN, str(Path(program("loadfleet")).parent) + "/"))
        out.append(path)
    return out


def test_systemd_verifies_the_units(tmp_path):
    result = subprocess.run(
        [systemd_analyze(), "verify", *map(str, units_with_this_venv(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


@pytest.mark.parametrize("name", SERVICES)
def test_systemd_rates_the_units_confined(name, tmp_path):
    unit = next(p for p in units_with_this_venv(tmp_path) if p.name == name)
    result = subprocess.run(
        [systemd_analyze(), "security", "--offline=yes", f"--threshold={MAX_EXPOSURE * 10:g}", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout[-600:]
    assert f"Overall exposure level for {name}:" in result.stdout


ESSENTIALS = {
    "User": "loadfleet",
    "Group": "loadfleet",
    "Restart": "always",
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "CapabilityBoundingSet": "",
    "AmbientCapabilities": "",
}


@pytest.mark.parametrize(
    "name, env_file, state",
    [
        ("loadfleet-controller.service", "/etc/loadfleet/controller.env", "loadfleet/controller"),
        ("loadfleet-agent.service", "/etc/loadfleet/agent.env", "loadfleet/agent"),
    ],
)
def test_each_unit_has_a_user_hardening_a_restart_policy_its_environment_file_and_state(name, env_file, state):
    unit = read_unit(UNITS / name)
    for key, value in ESSENTIALS.items():
        assert unit.value("Service", key) == value, f"{name}: {key}="
    assert unit.value("Service", "EnvironmentFile") == env_file
    assert unit.value("Service", "StateDirectory") == state
    assert unit.value("Service", "ExecStart").startswith(INSTALLED_BIN)
    assert f"%S/{state}/" in unit.value("Service", "ExecStart"), "runs / spool in the state directory"
    assert unit.value("Install", "WantedBy") == "multi-user.target"
    assert "network-online.target" in unit.value("Unit", "Wants")


def test_the_system_user_is_declared_for_systemd_sysusers():
    [line] = [x for x in (UNITS / "loadfleet.sysusers").read_text().splitlines() if x and not x.startswith("#")]
    kind, user, _id, _gecos_and_rest = line.split(maxsplit=3)
    assert (kind, user) == ("u", "loadfleet") and "/usr/sbin/nologin" in line


def service_env(unit: Unit, env_file: Path, rewrite: dict[str, str]) -> dict[str, str]:
    """What the service's process gets: its Environment= and its environment file, with the
    files of /etc/loadfleet and the addresses rewritten for this machine's test."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    for assignments in unit.values("Service", "Environment"):
        env.update(a.split("=", 1) for a in assignments.split())
    for key, value in read_environment_file(env_file).items():
        for old, new in rewrite.items():
            value = value.replace(old, new)
        env[key] = value
    return env


def test_the_units_command_lines_serve_tls_and_join_an_agent_with_its_labels_and_allow_list(processes, tmp_path):
    pki = make_pki(tmp_path / "pki", agents=("host-1",))
    shutil.copy(pki.cert("agent", "host-1"), pki.dir / "agent.crt")  # deploy.md: each host's own as agent.crt
    shutil.copy(pki.key("agent", "host-1"), pki.dir / "agent.key")
    port = free_port()
    state = tmp_path / "state"
    rewrite = {PKI: str(pki.dir), "0.0.0.0:7700": f"127.0.0.1:{port}", "ctrl.example:7700": f"localhost:{port}"}
    bin_dir = str(Path(program("loadfleet")).parent) + "/"

    argv = {}
    for name, env_file in (
        ("loadfleet-controller.service", "controller.env"),
        ("loadfleet-agent.service", "agent.env"),
    ):
        unit = read_unit(UNITS / name)
        env = service_env(unit, UNITS / env_file, rewrite)
        argv[name] = [
            bin_dir + a.removeprefix(INSTALLED_BIN) if a.startswith(INSTALLED_BIN) else a
            for a in command_line(unit, "ExecStart", env, state)
        ]
        processes.start(name, argv[name], env=env, cwd=tmp_path)
        if name == "loadfleet-controller.service":
            wait_for_port("127.0.0.1", port)

    controller = argv["loadfleet-controller.service"]
    assert controller[controller.index("--runs-dir") + 1] == str(state / "loadfleet/controller/runs")
    assert controller[-2:] == ["--tls-ca", str(pki.ca)], "LOADFLEET_CONTROLLER_ARGS split into words"
    agents = wait_for_agent(f"localhost:{port}", pki)
    assert [(a["agentId"], a.get("labels"), a.get("allowTargets")) for a in agents] == [
        ("host-1", {"rack": "r1"}, ["10.20.0.0/16"])
    ]
    agent = argv["loadfleet-agent.service"]
    assert agent[agent.index("--spool-dir") + 1] == str(state / "loadfleet/agent/spool")


def wait_for_agent(address: str, pki, timeout_s: float = 30) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        result = subprocess.run(
            [program("loadfleet"), "agents", "--json", "--controller", address, *pki.client_args("operator", "alice")],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if result.returncode == 0 and json.loads(result.stdout):
            return json.loads(result.stdout)
        assert time.monotonic() < deadline, f"no agent joined: {result.stdout} {result.stderr}"
        time.sleep(0.2)
