"""The fleet simulator lives in bench/fleet (fleetsim); its tests import it from there."""

import sys

from support.procs import REPO

sys.path.insert(0, str(REPO / "bench" / "fleet"))

# The reproductions' script and its evaluator live in bench/repro (reprokit).
sys.path.insert(0, str(REPO / "bench" / "repro"))
