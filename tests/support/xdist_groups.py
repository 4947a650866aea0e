"""Which tests share one pytest-xdist worker (`make test PYTEST_WORKERS=n`, --dist loadgroup).

A group's tests never run beside each other: "timing" holds tests whose assertions measure time
or CPU and fail when other tests load the cores; "mariadb" holds the labs that run
mariadb-install-db, which failed when two ran at once (tests/targets at -n 3). Paths are
relative to tests/. A serial run ignores the marks.
"""

from __future__ import annotations

from pathlib import Path

GROUP_OF_MODULE = {
    "agent/test_hoststats.py": "timing",
    "controller/analysis/test_selfwatch.py": "timing",
    "e2e/test_phases.py": "timing",
    "e2e/test_sweeps.py": "timing",
    "e2e/test_keepalive.py": "timing",  # exits "within 15 s" failed once at -n 3
    "bench/test_bench_scripts.py": "timing",
    "chaos/test_fleet_faults.py": "timing",  # clock-offset event missed once at -n 3
    "targets/test_mariadb.py": "mariadb",
    "targets/test_dbpages.py": "mariadb",
    "targets/test_spec_journey.py": "mariadb",
    "targets/test_journeyapp.py": "mariadb",
    "e2e/test_journeys.py": "mariadb",
}


def group_of(test_path: Path, tests_dir: Path) -> str | None:
    return GROUP_OF_MODULE.get(test_path.relative_to(tests_dir).as_posix())
