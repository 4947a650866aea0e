"""Every benchmark script at least starts: its imports still match the code it measures (an
engine bench importing a function the wire package no longer has went unnoticed until run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # starts real processes (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (REPO / "bench").glob("*/*.py") if p.read_text().count("argparse.ArgumentParser("))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_a_bench_script_starts_and_explains_itself(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def test_the_benches_are_found():
    names = {p.name for p in SCRIPTS}
    assert {"bench.py", "domain.py", "real.py", "reproduce.py"} <= names
