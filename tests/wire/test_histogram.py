"""The sparse histogram against hdrh, the reference implementation: the same bytes on the
wire, the same figures, exact merges; damaged or foreign bytes refused with a clear error."""

from __future__ import annotations

import base64
import random
import struct
import zlib

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from loadfleet.wire.histogram import (
    COUNTS_LEN,
    EMPTY,
    HIGHEST_US,
    Histogram,
    HistogramError,
    bucket_index,
    decode_buckets,
    summaries,
)


def reference(values) -> HdrHistogram:
    h = HdrHistogram(1, HIGHEST_US, 3)
    for v in values:
        h.record_value(v)
    return h


def lognormal(seed: int, n: int, sigma: float = 1.5) -> list[int]:
    rng = random.Random(seed)
    return [min(HIGHEST_US, int(rng.lognormvariate(7, sigma)) + 1) for _ in range(n)]


@pytest.mark.parametrize("seed, n, sigma", [(1, 1, 1.0), (2, 7, 0.2), (3, 5000, 1.5), (4, 20000, 3.0)])
def test_decoding_and_encoding_match_hdrh_byte_for_byte(seed, n, sigma):
    values = lognormal(seed, n, sigma)
    raw = base64.b64decode(reference(values).encode())
    decoded = Histogram.decode(raw)
    assert decoded == Histogram.of(values)
    assert Histogram(decoded.indices, decoded.counts).encode() == raw


@pytest.mark.parametrize("seed, n, sigma", [(3, 5000, 1.5), (4, 1, 1.0), (5, 7, 0.2), (6, 20000, 3.0)])
def test_figures_equal_hdrh_own(seed, n, sigma):
    values = lognormal(seed, n, sigma)
    h, mine = reference(values), Histogram.of(values)
    percents = [0.1, 50, 90, 99, 99.9, 100]
    assert mine.percentiles(percents) == [h.get_value_at_percentile(p) for p in percents]
    mean, stddev = mine.mean_and_stddev()
    assert mean == pytest.approx(h.get_mean_value(), rel=1e-12)
    assert stddev == pytest.approx(h.get_stddev(), rel=1e-9, abs=1e-9)
    assert mine.max_value == h.get_max_value() and mine.total == n
    assert mine.min_value == h.get_lowest_equivalent_value(min(values))


def test_merges_are_exact_whichever_way():
    parts = [Histogram.of(lognormal(seed, n)) for seed, n in ((1, 10), (2, 500), (3, 3000), (4, 1))]
    everything = Histogram.of([v for seed, n in ((1, 10), (2, 500), (3, 3000), (4, 1)) for v in lognormal(seed, n)])
    grouped = Histogram.merge([Histogram.merge(parts[:2]), Histogram.merge(parts[2:])])
    assert Histogram.merge(parts) == everything == grouped
    assert parts[0] + parts[1] + parts[2] + parts[3] == everything
    full = Histogram(np.array([5, 900]), np.array([3_000_000_000, 1]))  # beyond a uint32 a bucket
    assert Histogram.merge([full, full, Histogram.of([5])]).counts.tolist() == [6_000_000_001, 2]


def test_empty_histograms_cost_nothing_and_encode_to_nothing():
    assert Histogram.decode(b"") is EMPTY and not EMPTY and EMPTY.encode() == b""
    assert EMPTY.percentiles([50]) == [0] and EMPTY.max_value == 0 and EMPTY.total == 0
    assert Histogram.merge([EMPTY, EMPTY]) is EMPTY and Histogram.merge([]) is EMPTY


def test_bucket_index_is_hdrh_own():
    h = HdrHistogram(1, HIGHEST_US, 3)
    for v in (0, 1, 1023, 1024, 2047, 2048, 2049, 123_456, HIGHEST_US):
        assert bucket_index(v) == h._counts_index_for(v), v


def test_decoding_is_lazy_and_a_passed_on_histogram_is_never_encoded_again():
    raw = base64.b64decode(reference([5, 900, 1500]).encode())
    lazy = Histogram.decode(raw)
    assert lazy._indices is None and lazy.encode() is not None and lazy._indices is None
    assert lazy.total == 3 and lazy.encode() == raw


def _damaged(raw: bytes, how: str) -> bytes:
    if how == "cookie":
        return b"\x00\x00\x00\x00" + raw[4:]
    if how == "length":
        return raw[:4] + (len(raw) + 5).to_bytes(4, "big") + raw[8:]
    if how == "deflate":
        return raw[:8] + b"\xff" * (len(raw) - 8)
    if how == "digits":  # another shape: 2 significant digits
        data = bytearray(zlib.decompress(raw[8:]))
        data[12:16] = (2).to_bytes(4, "big")
        packed = zlib.compress(bytes(data))
        return raw[:4] + len(packed).to_bytes(4, "big") + packed
    if how == "short":
        return raw[:5]
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["cookie", "length", "deflate", "digits", "short"])
def test_bytes_that_are_not_a_histogram_are_refused_clearly(how):
    raw = base64.b64decode(reference([5, 900]).encode())
    with pytest.raises(HistogramError):
        Histogram.decode(_damaged(raw, how)).check()


def test_values_beyond_the_range_are_refused():
    too_big = HdrHistogram(1, 10 * HIGHEST_US, 3)
    too_big.record_value(5 * HIGHEST_US)
    with pytest.raises(HistogramError, match="above"):
        Histogram.decode(base64.b64decode(too_big.encode())).check()
    assert Histogram.decode(base64.b64decode(reference([7]).encode())).total == 1, "the scratch array is clean again"


def test_a_histogram_holds_its_filled_buckets_only():
    h = Histogram.of(lognormal(9, 100_000, sigma=0.5))
    assert h.buckets < COUNTS_LEN // 5 and h.indices.nbytes + h.counts.nbytes == 16 * h.buckets  # dense: 188 KB
    assert np.all(np.diff(h.indices) > 0)


@pytest.mark.parametrize(
    "values, count",
    [([5], 1), ([0, 1, 900, 1500, 2_000_000, HIGHEST_US], 300), (lognormal(7, 20000, 3.0), 1), ([7], 2**32 - 1)],
)
def test_the_packed_bucket_form_round_trips_in_about_two_bytes_a_bucket(values, count):
    h = Histogram.of(values, count=count)
    packed = h.to_buckets()
    assert Histogram.from_buckets(packed) == h
    assert len(packed) <= 8 + 2 * h.buckets + 6 * h.buckets
    assert Histogram.from_buckets(b"") is EMPTY and EMPTY.to_buckets() == b""


def test_a_bucket_too_full_for_the_form_says_so():
    assert Histogram.of([12, 13], count=2**33).to_buckets() is None


def test_a_reports_rows_are_decoded_at_once_each_its_own():
    parts = [Histogram.of(lognormal(s, 300)) for s in range(5)] + [EMPTY, Histogram.of([0]), Histogram.of([5])]
    assert decode_buckets([h.to_buckets() for h in parts]) == parts
    typical = Histogram.of(lognormal(1, 1000, 0.6))
    assert len(typical.to_buckets()) < 2.6 * typical.buckets, "about two bytes a bucket"


def packed(deltas, counts, wide_deltas=(), wide_counts=(), n=None):
    header = struct.pack("<HHHH", len(deltas) if n is None else n, len(wide_deltas), len(wide_counts), 0)
    return (
        header
        + bytes(deltas)
        + bytes(counts)
        + np.array(wide_deltas, "<u2").tobytes()
        + np.array(wide_counts, "<u4").tobytes()
    )


@pytest.mark.parametrize(
    "rows",
    [
        [b"\x01\x00"],  # shorter than a header
        [packed([5], [1], n=2)],  # its header says 2 buckets
        [packed([5, 0], [1, 1])],  # an escape without its wide value: a repeat
        [packed([0], [1], wide_deltas=[COUNTS_LEN])],  # out of range
        [packed([5], [0])],  # an escaped count without its wide value
        [packed([5], [0], wide_counts=[0])],  # an empty bucket
        [packed([5], [1], wide_counts=[3])],  # a wide value without its escape
        [packed([5], [0], wide_counts=[3]), packed([5], [0])],  # one row's wide value is not the next one's
        ["not bytes"],
        [packed([5, 4], [1, 1]), packed([250, 0], [1, 1], wide_deltas=[COUNTS_LEN - 200])],  # one bad row: all refused
    ],
)
def test_damaged_packed_buckets_are_refused(rows):
    with pytest.raises(HistogramError):
        decode_buckets(rows)


def test_a_read_histogram_passes_its_packed_form_on_as_it_came():
    h = Histogram.of(lognormal(8, 400))
    wire = h.to_buckets()
    (read,) = decode_buckets([wire])
    assert read.to_buckets() is wire and read == h


def test_rows_read_from_the_wire_are_merged_and_summarized_from_their_packed_bytes():
    parts = [Histogram.of(lognormal(seed, 300 + 50 * seed)) for seed in range(6)] + [Histogram.of([0, 0, 9])]
    read = decode_buckets([h.to_buckets() for h in parts])
    assert Histogram.merge(read) == Histogram.merge(parts)
    assert Histogram.merge([read[0], parts[1], read[2]]) == Histogram.merge(parts[:3])  # packed and arrays mixed
    percents = [1, 50, 99, 100]
    from_wire, own = summaries(read, percents), summaries(parts, percents)
    for field in ("mean", "stddev", "min_value", "max_value", "percentiles"):
        assert np.array_equal(getattr(from_wire, field), getattr(own, field)), field
    assert all(h._indices is None for h in read), "merged and summarized without being decoded into arrays"
    assert read[3] == parts[3] and read[3].total == parts[3].total  # and decoded when read


def test_summaries_of_many_histograms_equal_each_ones_own_figures():
    parts = [
        Histogram.of(lognormal(seed, n, sigma))
        for seed, n, sigma in ((1, 1, 1.0), (2, 7, 0.2), (3, 5000, 1.5), (4, 2, 3.0), (5, 900, 0.6))
    ] + [Histogram.of([0]), Histogram.of([7])]
    percents = [0.1, 50, 90, 99, 99.9, 100]
    s = summaries(parts, percents)
    for i, h in enumerate(parts):
        assert s.percentiles[i].tolist() == h.percentiles(percents)
        assert (s.min_value[i], s.max_value[i]) == (h.min_value, h.max_value)
        mean, stddev = h.mean_and_stddev()
        assert s.mean[i] == pytest.approx(mean, rel=1e-12) and s.stddev[i] == pytest.approx(
            stddev, rel=1e-12, abs=1e-12
        )
    with pytest.raises(ValueError, match="non-empty"):
        summaries([parts[0], EMPTY], percents)


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_adding_then_subtracting_equals_merging_the_rest_again(seed):
    """A rolling window's merge: add the newest interval, take out the oldest; the result is
    the merge of those left, bucket for bucket."""
    parts = [Histogram.of(lognormal(seed * 10 + i, 200 + 50 * i)) for i in range(6)]
    running = EMPTY
    for i, part in enumerate(parts):
        running = running + part
        if i >= 3:
            running = running.subtract(parts[i - 3])
            assert running == Histogram.merge(parts[i - 2 : i + 1])
    assert running.total == sum(p.total for p in parts[-3:])
    # The packed and V2 forms subtract the same.
    read = Histogram.from_buckets(running.to_buckets()).subtract(Histogram.decode(parts[-1].encode()))
    assert read == Histogram.merge(parts[-3:-1])


def test_subtracting_everything_leaves_the_empty_histogram_and_nothing_changes_nothing():
    h = Histogram.of([100, 2000, 2000])
    assert h.subtract(h) == EMPTY and not h.subtract(h)
    assert h.subtract(EMPTY) is h
    assert h.subtract(Histogram.of([2000])) == Histogram.of([100, 2000])


@pytest.mark.parametrize(
    "held, taken",
    [
        ([100], [5000]),  # a bucket never added
        ([100], [100, 100]),  # more in a bucket than was added
        ([], [100]),  # from nothing
        ([100, 5000], [HIGHEST_US]),  # beyond the highest bucket held
    ],
)
def test_subtracting_what_was_never_added_is_refused(held, taken):
    with pytest.raises(ValueError, match="cannot subtract"):
        Histogram.of(held).subtract(Histogram.of(taken))
