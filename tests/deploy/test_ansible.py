"""The Ansible playbook of docs/deploy.md installs what deploy/systemd ships: its files exist,
and the environment it writes sets the variables of the shipped agent.env, no more, no less.
(ansible-playbook --syntax-check and a --check run passed on it once by hand: docs/deploy.md.)"""

import re

import yaml

from support.procs import REPO
from support.unitfile import read_environment_file

PLAYBOOK = REPO / "deploy" / "ansible" / "loadfleet-agents.yml"


def tasks() -> list[dict]:
    [play] = yaml.safe_load(PLAYBOOK.read_text())
    assert play["hosts"] == "load" and play["become"] is True
    return play["tasks"]


def test_the_playbook_copies_files_that_exist():
    sources = [
        t["ansible.builtin.copy"]["src"]
        for t in tasks()
        if "src" in t.get("ansible.builtin.copy", {}) and "deploy/" in t["ansible.builtin.copy"]["src"]
    ]
    assert sources
    for src in sources:
        assert (REPO / src.replace("{{ repo }}/", "")).is_file(), src


def test_the_environment_it_writes_has_the_shipped_agent_variables():
    [env_task] = [t for t in tasks() if t.get("ansible.builtin.copy", {}).get("dest") == "/etc/loadfleet/agent.env"]
    written = set(re.findall(r"^(\w+)=", env_task["ansible.builtin.copy"]["content"], re.M))
    assert written == set(read_environment_file(REPO / "deploy" / "systemd" / "agent.env"))
