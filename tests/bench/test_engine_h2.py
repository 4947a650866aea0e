"""The h2 bench's reading of h2load (bench/engine/h2.py): succeeded requests count, failed,
errored and timed-out ones are errors, and output without its requests line is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.engine.h2 import parse_h2load

CAPTURED = (Path(__file__).parent / "fixtures" / "h2load-1.52.txt").read_text()  # h2load -c2 -m4 -D1, h2c


def test_a_captured_h2load_report_is_read():
    m = parse_h2load(CAPTURED, 0.5, 0.25, 7)
    assert (m.generator, m.requests, m.errors) == ("h2load", 12751, 0)
    assert m.requests_per_cpu_s == pytest.approx(12751 / 0.75)


def test_failed_errored_and_timed_out_requests_are_errors():
    out = CAPTURED.replace(
        "12751 succeeded, 0 failed, 0 errored, 0 timeout", "12000 succeeded, 5 failed, 3 errored, 2 timeout"
    )
    m = parse_h2load(out, 1.0, 0.0, 0)
    assert (m.requests, m.errors) == (12000, 10)


def test_output_without_a_requests_line_is_refused():
    with pytest.raises(RuntimeError, match="without a requests line"):
        parse_h2load("connect() failed\n", 0.1, 0.0, 0)
