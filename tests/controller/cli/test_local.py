"""`loadfleet run --local N`: how many engines each local agent runs. They count the CPUs this
process may run on (its affinity: `taskset`, as `make demo` pins the run), not the machine's:
two engines on one pinned core wait for each other and every step reads generator-bound."""

import os
import subprocess
import sys

import pytest

from loadfleet.controller.cli import local


@pytest.mark.parametrize(
    ("n_agents", "cpus", "engines"),
    [
        (1, 1, 1),
        (1, 2, 2),
        (2, 2, 1),
        (2, 5, 2),  # the CPUs left over are not shared out: no agent gets more than its share
        (3, 2, 1),  # more agents than CPUs: still at least one engine each
        (4, 16, 4),
    ],
)
def test_engines_share_the_usable_cpus_among_the_agents(n_agents, cpus, engines):
    assert local.engines_per_agent(n_agents, cpus) == engines


def test_usable_cpus_are_the_affinity_not_the_machine(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {1}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert local.usable_cpus() == 1


def test_usable_cpus_without_affinity_are_the_machine(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert local.usable_cpus() == 3


@pytest.mark.process  # starts a pinned child process (tests/conftest.py)
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_a_pinned_process_counts_its_one_cpu():
    """As under `taskset -c 1`: a process pinned to one CPU gives its one agent one engine."""
    cpu = min(os.sched_getaffinity(0))
    code = (
        f"import os; os.sched_setaffinity(0, {{{cpu}}}); from loadfleet.controller.cli import local; "
        "print(local.engines_per_agent(1, local.usable_cpus()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "1"
