"""The reproduction plans (plans/repro-*.yaml, docs/reproductions.md) stay runnable: each one's
header gives the exact commands, its lab spec parses, its targets are servers of that lab, and
the plan passes `loadfleet validate` once the lab's workload exists. Fast: nothing is started,
the workloads are generated into a temporary copy of the repository's layout."""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
from itertools import takewhile
from pathlib import Path

import pytest
import yaml

from loadfleet.targets.netns import host_addresses
from loadfleet.targets.spec import load_spec
from loadfleet.targets.workload import generate
from support.procs import program

REPO = Path(__file__).resolve().parents[2]
PLANS = REPO / "plans"
LAB_SUFFIX = ".lab.yaml"
DOC = REPO / "docs" / "reproductions.md"
REPRO_PLANS = sorted(p for p in PLANS.glob("repro-*.yaml") if not p.name.endswith(LAB_SUFFIX))
LAB_SPECS = sorted(PLANS.glob(f"repro-*{LAB_SUFFIX}"))
LAB_UP = re.compile(r"^#\s+loadfleet-lab up (\S+) --state-dir (\S+)\s*$", re.MULTILINE)
DOC_LINK = re.compile(r"docs/reproductions\.md#([\w-]+)")


def header(plan: Path) -> str:
    """The comment lines the plan starts with."""
    return "\n".join(takewhile(lambda line: line.startswith("#"), plan.read_text().splitlines()))


def lab_of(plan: Path) -> tuple[Path, str]:
    """The lab spec and state directory of the plan's `loadfleet-lab up` line."""
    found = LAB_UP.findall(header(plan))
    assert len(found) == 1, f"{plan.name}: the header needs one `loadfleet-lab up SPEC --state-dir DIR` line"
    spec, state_dir = found[0]
    return REPO / spec, state_dir


def test_there_are_reproduction_plans_and_labs():
    assert len(REPRO_PLANS) >= 5 and LAB_SPECS


@pytest.mark.parametrize("plan", REPRO_PLANS, ids=lambda p: p.name)
def test_the_header_gives_the_commands_to_run_the_plan(plan):
    text = header(plan)
    spec, state_dir = lab_of(plan)
    assert spec.is_file(), f"{plan.name}: {spec} does not exist"
    assert re.search(rf"loadfleet run plans/{re.escape(plan.name)}(\s|$)", text, re.MULTILINE)
    assert f"loadfleet-lab down --state-dir {state_dir}" in text
    assert DOC_LINK.search(text), f"{plan.name}: the header needs a link to its section of docs/reproductions.md"


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("plan", REPRO_PLANS, ids=lambda p: p.name)
def test_the_header_links_to_a_section_of_the_doc(plan):
    anchors = {slug(line.lstrip("#")) for line in DOC.read_text().splitlines() if line.startswith("## ")}
    for anchor in DOC_LINK.findall(header(plan)):
        assert anchor in anchors, f"{plan.name}: docs/reproductions.md has no section #{anchor}"


def served_urls(spec) -> set[str]:
    """The servers' URLs: on loopback as listed (each address it listens on), on lab hosts at their
    host's address (a fixed subnet's addresses go to the hosts in spec order, as `loadfleet-lab up`
    gives them)."""
    if not spec.hosts:
        return {f"http://{host}:{s.port}" for s in spec.servers for host in (s.host, *s.also_listen)}
    assert spec.subnet, "a lab on hosts that plans name needs a fixed network.subnet"
    addresses = dict(zip((h.name for h in spec.hosts), host_addresses(ipaddress.IPv4Network(spec.subnet))))
    return {f"http://{addresses[s.on]}:{s.port}" for s in spec.servers}


@pytest.mark.parametrize("plan", REPRO_PLANS, ids=lambda p: p.name)
def test_the_targets_are_servers_of_the_lab(plan):
    spec_path, _ = lab_of(plan)
    served = served_urls(load_spec(spec_path))
    targets = {t["url"].rstrip("/") for t in yaml.safe_load(plan.read_text())["targets"]}
    assert targets <= served, f"{plan.name}: {sorted(targets - served)} are not in {spec_path.name}"


@pytest.mark.parametrize("spec", LAB_SPECS, ids=lambda p: p.name)
def test_every_lab_spec_parses_on_fixed_ports_and_is_used(spec):
    parsed = load_spec(spec)
    assert all(s.port != 0 for s in parsed.servers), "plans name their targets, so ports are fixed"
    assert any(lab_of(p)[0] == spec for p in REPRO_PLANS), f"no plan starts {spec.name}"


@pytest.mark.parametrize("plan", REPRO_PLANS, ids=lambda p: p.name)
def test_the_plan_validates_once_its_lab_has_written_the_workload(plan, tmp_path):
    spec_path, state_dir = lab_of(plan)
    spec = load_spec(spec_path)
    # The lab writes the files to STATE/export for an NFS docroot, STATE/docroot otherwise;
    # a plan's manifest path is relative to plans/, so mirror that layout.
    generate(tmp_path / state_dir / ("export" if spec.nfs else "docroot"), spec.workload)
    (tmp_path / "plans").mkdir()
    copy = tmp_path / "plans" / plan.name
    shutil.copy(plan, copy)
    result = subprocess.run([program("loadfleet"), "validate", str(copy)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
