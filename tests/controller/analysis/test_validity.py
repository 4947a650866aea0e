"""The rules of validity.py read on their own: a target that failed (FailureTally)."""

from __future__ import annotations

import pytest

from loadfleet.controller.analysis.validity import MAX_TARGETS_NAMED, FailureTally, address
from loadfleet.controller.model.verdict import Signal, Validity
from loadfleet.v1 import stats_pb2
from loadfleet.wire.stats import StatsRow

REFUSED = stats_pb2.ERROR_KIND_CONNECT_REFUSED
TARGET = "http://127.0.0.2:18081"


def failing(requests: int, *, ok: int = 0, http_5xx: int = 0, target: str = TARGET, **errors: int) -> StatsRow:
    """A row of `requests`: `ok` 2xx, `http_5xx` 5xx, and errors by kind name (`connect_refused=3`)."""
    kinds = {stats_pb2.ErrorKind.Value("ERROR_KIND_" + name.upper()): n for name, n in errors.items()}
    return StatsRow(target, "r", requests=requests, status=[0, ok, 0, 0, http_5xx], errors=kinds)


@pytest.mark.parametrize(
    "row, failed",
    [
        (failing(100, connect_refused=100), True),
        (failing(1000, ok=9, connect_refused=991), True),  # 0.9 % ok
        (failing(1000, ok=10, connect_refused=990), False),  # 1 % ok: the target answers
        (failing(100, connect_refused=90, http_5xx=10), True),  # 90 % of the failures are the target's
        (failing(100, connect_refused=89, http_5xx=11), False),
        (failing(100, connect_timeout=100), True),
        (failing(100, timeout=100), True),
        (failing(100, reset=100), True),
        (failing(100, protocol=100), True),  # an h2c-only server: it speaks, but not HTTP/1.1
        (failing(100, http_5xx=100), False),  # a 503 is an answer, measured as one
        (failing(100, tls=100), False),
        (failing(100, other=100), False),
        (failing(100, local_ports=100), False),  # the generator's own failure
        (failing(100, local_fds=100), False),
        (failing(100, ok=100), False),
        (StatsRow(TARGET, "r"), False),  # no request: nothing to judge
    ],
)
def test_a_target_failed_when_almost_nothing_was_ok_and_the_failures_were_its_own(row, failed):
    assert FailureTally.of([row]).target_failed is failed


def test_the_rule_reads_the_sum_of_the_rows_not_each_row():
    half_ok = failing(100, ok=100, target="http://b:1")
    assert FailureTally.of([failing(100, connect_refused=100), half_ok]).target_failed is False
    tally = FailureTally.of([failing(50, connect_refused=50)])
    tally.merge(FailureTally.of([failing(50, connect_refused=49, ok=1)]))
    assert (tally.requests, tally.ok, tally.failed, tally.target_side) == (100, 1, 99, 99)
    assert tally.target_failed is False  # 1 % ok
    assert tally.by_target == {TARGET: {REFUSED: 99}}


def test_the_finding_names_the_failures_and_the_target_s_address():
    tally = FailureTally.of([failing(2_037_912, connect_refused=2_037_912)])
    assert tally.describe() == "the target failed: 2,037,912 connects refused by 127.0.0.2:18081"
    reason = tally.reason()
    assert (reason.signal, reason.validity, reason.agent) == (Signal.TARGET_FAILED, Validity.SUSPECT, "")
    assert reason.describe() == tally.describe()


def test_the_finding_counts_each_kind_and_target_the_most_failed_first():
    tally = FailureTally.of(
        [
            failing(3, reset=1, timeout=2, target="http://b:2"),
            failing(10, connect_refused=9, protocol=1),
            failing(1, connect_timeout=1, target="http://user@c:3/x"),
        ]
    )
    assert tally.describe() == (
        "the targets failed: 9 connects refused, 1 response not HTTP/1.1 by 127.0.0.2:18081; "
        "2 requests timed out, 1 connection reset by b:2; 1 connect timed out by c:3"
    )


def test_a_finding_names_a_bounded_number_of_targets():
    rows = [failing(10 + i, connect_refused=10 + i, target=f"http://t{i}:80") for i in range(MAX_TARGETS_NAMED + 3)]
    text = FailureTally.of(rows).describe()
    assert text.endswith("; and 3 more targets") and text.count(" by ") == MAX_TARGETS_NAMED
    assert text.startswith(f"the targets failed: {10 + MAX_TARGETS_NAMED + 2} connects refused by t7:80")


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://127.0.0.2:18081", "127.0.0.2:18081"),
        ("https://u:p@web:443/a", "web:443"),
        ("http://[::1]:80", "[::1]:80"),
    ],
)
def test_a_target_s_address(url, expected):
    assert address(url) == expected
