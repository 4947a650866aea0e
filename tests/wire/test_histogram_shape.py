"""Every copy of the histogram shape equals the Python one (wire/histogram.py): the engine's
bounds (Rust), the Gatling hook's (Java) and the bucket loops' number of counts (proto/native),
so histograms from every driver merge without loss."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loadfleet.wire.histogram import COUNTS_LEN, HIGHEST_US, LOWEST_US, SIGNIFICANT_DIGITS

ROOT = Path(__file__).resolve().parents[2]
SHAPE = {"LOWEST_US": LOWEST_US, "HIGHEST_US": HIGHEST_US, "SIGNIFICANT_DIGITS": SIGNIFICANT_DIGITS}


def _constants(source: str, pattern: str) -> dict[str, int]:
    """The shape's constants of a source file, by name: `pattern` matches a name and its value."""
    found = {name: int(value.replace("_", "").rstrip("L")) for name, value in re.findall(pattern, source)}
    return {name: found[name] for name in SHAPE if name in found}


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        ("agent/engine/src/histogram.rs", r"const (\w+): \w+ = ([\d_]+);"),
        (
            "agent/gatling/src/main/java/loadfleet/gatling/IntervalRecorder.java",
            r"static final \w+ (\w+) = ([\d_]+L?);",
        ),
    ],
)
def test_a_drivers_bounds_are_the_python_ones(path, pattern):
    assert _constants((ROOT / path).read_text(), pattern) == SHAPE


def test_the_native_bucket_loops_count_the_python_buckets():
    source = (ROOT / "proto/native/src/lib.rs").read_text()
    magnitude = int(re.search(r"const SUB_BUCKET_HALF_MAGNITUDE: u32 = (\d+);", source)[1])
    buckets = int(re.search(r"const COUNTS_LEN: usize = (\d+) \* \(1 << SUB_BUCKET_HALF_MAGNITUDE\);", source)[1])
    assert buckets * (1 << magnitude) == COUNTS_LEN
