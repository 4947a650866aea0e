"""Every benchmark module at least starts: its imports still match the code it measures (an
engine bench importing a function the wire package no longer has went unnoticed until run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # starts real processes (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (REPO / "bench").glob("*/*.py") if p.read_text().count("argparse.ArgumentParser("))
# Benches that start a server as the tests do (tests/support): run with PYTHONPATH=tests.
WITH_TEST_SUPPORT = frozenset({"bench.sink.bench"})


def module_of(script: Path) -> str:
    return ".".join(script.relative_to(REPO).with_suffix("").parts)


@pytest.mark.parametrize("script", SCRIPTS, ids=module_of)
def test_a_bench_module_starts_and_explains_itself(script):
    module = module_of(script)
    env = {**os.environ, "PYTHONPATH": "tests"} if module in WITH_TEST_SUPPORT else None
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def test_the_benches_are_found():
    assert {"bench.fleet.bench", "bench.fleet.domain", "bench.fleet.real", "bench.repro.reproduce"} <= {
        module_of(p) for p in SCRIPTS
    }
