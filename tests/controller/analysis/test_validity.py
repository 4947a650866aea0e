"""The rules of validity.py read on their own: a target that failed (FailureTally), and the
open model's send lag against the latency it inflates."""

from __future__ import annotations

import pytest

from loadfleet.controller.analysis.validity import (
    MAX_TARGETS_NAMED,
    FailureTally,
    address,
    lag_of_latency,
    mean_latencies_us,
    row_reasons,
)
from loadfleet.controller.model.verdict import Signal, Validity
from loadfleet.v1 import stats_pb2
from loadfleet.wire.histogram import Histogram
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


# ---- The open model's send lag weighed against the latency it inflates.


def open_row(lag_sum_us: int, *, sent: int = 1000, not_sent: int = 0, latency_us: int = 940) -> StatsRow:
    """An agent's open-model interval: `sent` requests sent (of `sent + not_sent` due), with
    their lags summed, each response `latency_us` long."""
    return StatsRow(
        TARGET,
        "r",
        requests=sent,
        status=[0, sent, 0, 0, 0],
        histogram=Histogram.of([latency_us] * sent if latency_us else []),
        scheduled=sent + not_sent,
        not_sent=not_sent,
        send_lag_sum_us=lag_sum_us,
    )


@pytest.mark.parametrize(
    "lag_sum_us, sent, mean_latency_us, expected, text",
    [
        # issue 33: 0.79 of a 0.94 ms mean was the generator's own scheduling
        (790_000, 1000, 940.0, Validity.INVALID, "send lag 0.79 ms is 84 % of the 0.94 ms mean latency"),
        (94_000, 1000, 940.0, Validity.INVALID, "send lag 0.09 ms is 10 % of the 0.94 ms mean latency"),
        (93_000, 1000, 940.0, Validity.SUSPECT, "send lag 0.09 ms is 10 % of the 0.94 ms mean latency"),  # 9.9 %
        (47_000, 1000, 940.0, Validity.SUSPECT, "send lag 0.05 ms is 5 % of the 0.94 ms mean latency"),
        (46_000, 1000, 940.0, None, ""),  # 4.9 %
        (790_000, 1000, 50_000.0, None, ""),  # the same lag against a 50 ms service: 1.6 %
        (3_000_000, 1000, 12_000.0, Validity.INVALID, "send lag 3.00 ms is 25 % of the 12.00 ms mean latency"),
        (0, 1000, 940.0, None, ""),  # not measured (Gatling): not judged
        (790_000, 0, 940.0, None, ""),  # nothing sent
        (790_000, 1000, 0.0, None, ""),  # no latency measured (every request failed)
    ],
)
def test_an_open_model_s_mean_send_lag_is_weighed_against_its_mean_latency(
    lag_sum_us, sent, mean_latency_us, expected, text
):
    reason = lag_of_latency("a1", open_row(lag_sum_us, sent=sent), mean_latency_us)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None
        assert (reason.signal, reason.validity, reason.agent, reason.text) == (
            Signal.SEND_LAG_SHARE,
            expected,
            "a1",
            text,
        )


def test_the_mean_lag_is_over_the_requests_sent_not_those_dropped():
    # 500 of 1000 due were not sent: 0.79 ms summed over 500 sends is 1.58 ms each.
    reason = lag_of_latency("a1", open_row(790_000, sent=500, not_sent=500), 15_800.0)
    assert reason is not None and reason.text == "send lag 1.58 ms is 10 % of the 15.80 ms mean latency"


@pytest.mark.parametrize("free, judged", [(True, True), (False, False)])
def test_the_lag_counts_only_while_connections_were_free(free, judged):
    row = open_row(790_000)
    reasons = row_reasons("a1", row, free, mean_latencies_us([row])[0])
    assert [r.signal for r in reasons] == ([Signal.SEND_LAG_SHARE] if judged else [])


def test_mean_latencies_of_many_rows_at_once_and_none_of_an_empty_one():
    rows = [open_row(1, latency_us=940), open_row(1, latency_us=0), open_row(1, latency_us=12_000)]
    means = mean_latencies_us(rows)
    assert means[1] == 0.0 and means[0] == pytest.approx(940, rel=1e-3) and means[2] == pytest.approx(12_000, rel=1e-3)
    assert mean_latencies_us([]) == []
