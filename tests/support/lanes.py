"""Which lane of the suite runs (tests/conftest.py): `make test-unit` sets LOADFLEET_TEST_LANE=unit."""

from __future__ import annotations

import os

UNIT_LANE_ENV = "LOADFLEET_TEST_LANE"


def in_unit_lane() -> bool:
    return os.environ.get(UNIT_LANE_ENV) == "unit"


def examples(full: int) -> int:
    """How many generated examples a fuzz test runs: all in `make test`, a quarter (the same
    first ones: the fuzz tests are derandomized) in the edit-test loop's lane."""
    return max(1, full // 4) if in_unit_lane() else full
