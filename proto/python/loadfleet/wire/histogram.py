"""HDR latency histograms held compactly: the non-empty buckets only.

Every latency histogram in loadfleet has the same shape: microseconds from 1 µs to 1 h at 3
significant digits, 23,552 buckets. A dense array of them costs 184 KiB, and a controller
merging 1,000 agents × 10 rows a second cannot keep one per row, nor afford hdrh's Python
loops over all buckets for every merge. A `Histogram` here keeps only the indices of its
non-empty buckets (ascending) and their counts, in two numpy arrays: an interval's row
typically has tens to hundreds of them.

Histograms travel in two encodings. HdrHistogram's standard V2 compressed encoding is what
the engine's Rust `hdrhistogram`, Gatling's Java HdrHistogram and Python's `hdrh` read and
write: drivers send it, and latency.hlog holds it. `Histogram.decode` keeps those bytes and
decodes them only when the counts are first needed, so a histogram that is only passed on
is never decoded or encoded again; decoding uses hdrh's C varint decoder (`pyhdrh`).
Between agents and the controller they travel as *packed buckets* (`to_buckets`,
`decode_buckets`, stats.proto's `latency_buckets`): the non-empty buckets' index deltas and
counts as bytes, the rare ones that do not fit a byte as wider integers beside them. A
controller reads all rows of a report with a dozen numpy calls, against tens of
microseconds per row for V2 (inflate, then varints), and it reads ten thousand rows a
second at 1,000 agents; the bytes are about twice those of V2.

Values follow hdrh's conventions exactly, so figures do not change with the
representation: a percentile is the highest value equivalent to the first bucket whose
cumulative count reaches the percentile's share, the mean weighs each bucket's median
equivalent value, the maximum is the highest value equivalent to the top bucket.

`HistogramSum` adds many histograms into one dense array (cheap per add) and hands back a
`Histogram`: use it to merge hundreds of rows; `Histogram.merge` suits a few.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import struct
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from pyhdrh import decode as _varint_decode  # hdrh's C extension
from pyhdrh import encode as _varint_encode

# The common shape. Histograms from the engine and the Gatling hook use the same bounds,
# so they merge without loss.
LOWEST_US = 1
HIGHEST_US = 3_600_000_000
SIGNIFICANT_DIGITS = 3

_SUB_BUCKET_HALF_MAGNITUDE = 10  # 2 * 10**3 needs 11 bits: 2,048 sub-buckets, half 1,024
_SUB_BUCKET_HALF_COUNT = 1 << _SUB_BUCKET_HALF_MAGNITUDE
_SUB_BUCKET_MASK = 2 * _SUB_BUCKET_HALF_COUNT - 1
_BUCKET_COUNT = 22  # 2,048 << 21 is the first power of two above HIGHEST_US
COUNTS_LEN = (_BUCKET_COUNT + 1) * _SUB_BUCKET_HALF_COUNT  # 23,552

# V2 encoding (HdrHistogram's "compressed histogram" format): an 8-byte big-endian header
# (cookie, length) around a zlib stream of a 40-byte payload header and the counts as
# ZigZag LEB128 varints, runs of empty buckets as negative counts.
_COMPRESSED_COOKIE = 0x1C849314
_ENCODING_COOKIE = 0x1C849313
_COOKIE_BASE_MASK = ~0xF0
_EXTERNAL = struct.Struct(">II")
_PAYLOAD = struct.Struct(">IIIIqqd")
_WORD_SIZE = 8
_MAX_VARINT_BYTES = 9

_INDEX = np.int64
_COUNT = np.int64

# The packed bucket form (stats.proto, latency_buckets): n, wide deltas, wide counts, zero.
_PACKED = struct.Struct("<HHHH")
_MAX_WIDE_COUNT = np.iinfo(np.uint32).max


class HistogramError(ValueError):
    """Bytes that are not a V2-encoded histogram of loadfleet's shape."""


def _bucket_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per bucket index: its lowest, highest and median equivalent values (µs)."""
    index = np.arange(COUNTS_LEN, dtype=np.int64)
    bucket = (index >> _SUB_BUCKET_HALF_MAGNITUDE) - 1
    sub_bucket = (index & (_SUB_BUCKET_HALF_COUNT - 1)) + _SUB_BUCKET_HALF_COUNT
    first = bucket < 0
    sub_bucket[first] -= _SUB_BUCKET_HALF_COUNT
    bucket[first] = 0
    lowest = sub_bucket << bucket
    size = np.left_shift(1, bucket)
    return lowest, lowest + size - 1, (lowest + (size >> 1)).astype(np.float64)


LOWEST_VALUE, HIGHEST_VALUE, MEDIAN_VALUE = _bucket_tables()


def bucket_index(value_us: int) -> int:
    """The bucket a value is counted in (hdrh's counts index)."""
    if value_us < 0 or value_us > HIGHEST_US:
        raise ValueError(f"{value_us} µs is outside {LOWEST_US}..{HIGHEST_US}")
    bucket = max(0, (value_us | _SUB_BUCKET_MASK).bit_length() - (_SUB_BUCKET_HALF_MAGNITUDE + 1))
    sub_bucket = value_us >> bucket
    return ((bucket + 1) << _SUB_BUCKET_HALF_MAGNITUDE) + sub_bucket - _SUB_BUCKET_HALF_COUNT


class _Scratch(threading.local):
    """A zeroed dense counts array per thread for the C decoder and encoder, which work on
    dense arrays. Every user leaves it zeroed again."""

    def __init__(self) -> None:
        self.buffer = (ctypes.c_int64 * COUNTS_LEN)()
        self.array = np.ctypeslib.as_array(self.buffer)
        self.address = ctypes.addressof(self.buffer)
        self.varints = (ctypes.c_byte * (COUNTS_LEN * _MAX_VARINT_BYTES))()  # the encoder's output


_scratch = _Scratch()


def _decode_arrays(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    if len(raw) < _EXTERNAL.size:
        raise HistogramError(f"{len(raw)} bytes are too short for an encoded histogram")
    cookie, length = _EXTERNAL.unpack_from(raw)
    if cookie & _COOKIE_BASE_MASK != _COMPRESSED_COOKIE & _COOKIE_BASE_MASK or length != len(raw) - _EXTERNAL.size:
        raise HistogramError("not a V2 compressed histogram (wrong cookie or length)")
    try:
        data = zlib.decompress(memoryview(raw)[_EXTERNAL.size :])
    except zlib.error as exc:
        raise HistogramError(f"the histogram's deflate stream is damaged: {exc}") from exc
    if len(data) < _PAYLOAD.size:
        raise HistogramError("the histogram's payload is shorter than its header")
    cookie, payload_len, offset, digits, lowest, _highest, _ratio = _PAYLOAD.unpack_from(data)
    if cookie & _COOKIE_BASE_MASK != _ENCODING_COOKIE & _COOKIE_BASE_MASK:
        raise HistogramError("not a V2 histogram payload (wrong cookie)")
    if offset or digits != SIGNIFICANT_DIGITS or lowest != LOWEST_US:
        raise HistogramError(
            f"a histogram of another shape (lowest {lowest}, {digits} digits); "
            f"loadfleet's are {LOWEST_US} µs at {SIGNIFICANT_DIGITS} digits"
        )
    if payload_len > len(data) - _PAYLOAD.size:
        raise HistogramError("the histogram's payload is cut short")
    scratch = _scratch.array
    try:
        found = _varint_decode(
            data[: _PAYLOAD.size + payload_len], _PAYLOAD.size, _scratch.address, COUNTS_LEN, _WORD_SIZE
        )
    except (IndexError, ValueError) as exc:
        scratch[:] = 0
        raise HistogramError(f"the histogram holds values above {HIGHEST_US} µs: {exc}") from exc
    if found["total"] == 0:
        scratch[:] = 0  # zero counts may still have been written
        return _NO_INDICES, _NO_COUNTS
    low, high = found["min_nonzero_index"], found["max_nonzero_index"] + 1
    window = scratch[low:high]
    indices = np.flatnonzero(window)
    counts = window[indices]  # a copy (fancy indexing)
    window[:] = 0
    if (counts < 0).any():
        raise HistogramError("the histogram has negative counts")
    return indices + low, counts


_NO_INDICES = np.empty(0, dtype=_INDEX)
_NO_COUNTS = np.empty(0, dtype=_COUNT)
_NO_INDICES.flags.writeable = False
_NO_COUNTS.flags.writeable = False


def _encode_arrays(indices: np.ndarray, counts: np.ndarray) -> bytes:
    if not len(indices):
        return b""
    limit = int(indices[-1]) + 1
    scratch = _scratch.array
    scratch[indices] = counts
    out = _scratch.varints
    try:
        used = _varint_encode(_scratch.address, limit, _WORD_SIZE, ctypes.addressof(out), len(out))
    finally:
        scratch[indices] = 0
    header = _PAYLOAD.pack(_ENCODING_COOKIE, used, 0, SIGNIFICANT_DIGITS, LOWEST_US, HIGHEST_US, 1.0)
    compressed = zlib.compress(header + ctypes.string_at(out, used))
    return _EXTERNAL.pack(_COMPRESSED_COOKIE, len(compressed)) + compressed


class Histogram:
    """An immutable latency histogram (µs): non-empty bucket indices and their counts.

    Built from encoded bytes (`decode`, lazily), from values (`of`), or by merging. An
    empty histogram costs nothing and encodes to b"" (as on the wire)."""

    __slots__ = ("_raw", "_indices", "_counts", "_packed")

    def __init__(
        self,
        indices: np.ndarray | None = _NO_INDICES,
        counts: np.ndarray | None = _NO_COUNTS,
        *,
        raw: bytes | None = None,
        packed: bytes | None = None,
    ):
        # indices and counts None: not decoded yet, `raw` holds the encoding (decode()).
        self._raw = raw
        self._indices = indices
        self._counts = counts
        # The packed bucket form it was read from: passed on (journal, followers) as it came.
        self._packed = packed

    @classmethod
    def decode(cls, raw: bytes) -> Histogram:
        """A histogram from its V2 encoding; b"" is the empty histogram. The bytes are kept
        and decoded when the counts are first read (HistogramError then if they are bad:
        call `check()` to find out now)."""
        if not raw:
            return EMPTY
        return cls(None, None, raw=bytes(raw))

    @classmethod
    def from_buckets(cls, packed: bytes) -> Histogram:
        """A histogram from its packed bucket form (b"": the empty histogram)."""
        return decode_buckets([packed])[0]

    def to_buckets(self) -> bytes | None:
        """The packed bucket form (stats.proto, `latency_buckets`); None when a bucket holds
        more than a uint32 (use `encode` then)."""
        if self._packed is not None:
            return self._packed
        indices, counts = self._arrays()
        if not len(indices):
            return b""
        if counts.max() > _MAX_WIDE_COUNT:
            return None
        deltas = np.diff(indices, prepend=0)
        wide_deltas = (deltas == 0) | (deltas > 255)
        wide_counts = counts > 255
        header = _PACKED.pack(len(indices), int(wide_deltas.sum()), int(wide_counts.sum()), 0)
        return b"".join(
            (
                header,
                np.where(wide_deltas, 0, deltas).astype(np.uint8).tobytes(),
                np.where(wide_counts, 0, counts).astype(np.uint8).tobytes(),
                deltas[wide_deltas].astype("<u2").tobytes(),
                counts[wide_counts].astype("<u4").tobytes(),
            )
        )

    @classmethod
    def of(cls, values_us: Iterable[int], count: int = 1) -> Histogram:
        """A histogram of these values, each counted `count` times (tests, fakes)."""
        indices = np.array([bucket_index(int(v)) for v in values_us], dtype=_INDEX)
        unique, counts = np.unique(indices, return_counts=True)
        return cls(unique, counts.astype(_COUNT) * count)

    @classmethod
    def merge(cls, histograms: Iterable[Histogram]) -> Histogram:
        """The sum of a few histograms (for many, HistogramSum is cheaper)."""
        parts = [h for h in histograms if h]
        if len(parts) <= 1:
            return parts[0] if parts else EMPTY
        indices = np.concatenate([h.indices for h in parts])
        order = np.argsort(indices, kind="stable")
        indices = indices[order]
        counts = np.concatenate([h.counts for h in parts])[order]
        firsts = np.flatnonzero(np.concatenate(([True], indices[1:] != indices[:-1])))
        return cls(indices[firsts], np.add.reduceat(counts, firsts))

    def check(self) -> Histogram:
        """Decodes now; raises HistogramError if the bytes are not a valid histogram."""
        self._arrays()
        return self

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._indices is None or self._counts is None:
            assert self._raw is not None  # a histogram not decoded yet is made from its encoding
            self._indices, self._counts = _decode_arrays(self._raw)
        return self._indices, self._counts

    @property
    def indices(self) -> np.ndarray:
        return self._arrays()[0]

    @property
    def counts(self) -> np.ndarray:
        return self._arrays()[1]

    @property
    def buckets(self) -> int:
        """Non-empty buckets: what this histogram costs in memory (16 bytes each)."""
        return len(self.indices)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def __bool__(self) -> bool:
        return bool(self._raw) or bool(self._indices is not None and len(self._indices))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Histogram)
            and np.array_equal(self.indices, other.indices)
            and np.array_equal(self.counts, other.counts)
        )

    def __hash__(self) -> int:
        return hash((self.indices.tobytes(), self.counts.tobytes()))

    def __repr__(self) -> str:
        return f"Histogram({self.total} values in {self.buckets} buckets)"

    def encode(self) -> bytes:
        """The V2 compressed encoding (b"" when empty); the decoded bytes when unchanged."""
        if self._raw is not None:
            return self._raw
        self._raw = _encode_arrays(*self._arrays())
        return self._raw

    def __add__(self, other: Histogram) -> Histogram:
        return Histogram.merge((self, other))

    @property
    def min_value(self) -> int:
        """The lowest value equivalent to the lowest non-empty bucket (0 when empty)."""
        indices = self.indices
        return int(LOWEST_VALUE[indices[0]]) if len(indices) else 0

    @property
    def max_value(self) -> int:
        """The highest value equivalent to the highest non-empty bucket (0 when empty)."""
        indices = self.indices
        return int(HIGHEST_VALUE[indices[-1]]) if len(indices) else 0

    def percentiles(self, percents: Iterable[float]) -> list[int]:
        """hdrh's value at each percentile: the highest equivalent value of the first bucket
        whose cumulative count reaches max(1, round(p % of the total)); 0 when empty."""
        indices, counts = self._arrays()
        percents = list(percents)
        if not len(indices):
            return [0] * len(percents)
        cumulative = np.cumsum(counts)
        total = int(cumulative[-1])
        targets = [max(1, int(p * total / 100 + 0.5)) for p in percents]
        at = np.searchsorted(cumulative, targets)
        return [int(HIGHEST_VALUE[indices[min(i, len(indices) - 1)]]) for i in at]

    def mean_and_stddev(self) -> tuple[float, float]:
        """Mean and population standard deviation (µs) over bucket median values."""
        indices, counts = self._arrays()
        if not len(indices):
            return 0.0, 0.0
        n = counts.astype(np.float64)
        values = MEDIAN_VALUE[indices]
        total = n.sum()
        mean = float((n * values).sum() / total)
        return mean, math.sqrt(float((n * (values - mean) ** 2).sum() / total))


EMPTY = Histogram()


def decode_buckets(rows: list[bytes]) -> list[Histogram]:
    """Histograms from the packed bucket forms of many rows (a report's), decoded and
    checked at once: a dozen numpy calls for the lot, where each call costs microseconds
    whatever its size. HistogramError if any is malformed (a length that does not match its
    header, indices out of range or not ascending, empty buckets)."""
    parts = []  # per row: (n, deltas, counts, wide deltas, wide counts)
    for raw in rows:
        if not raw:
            parts.append((0, b"", b"", b"", b""))
            continue
        if len(raw) < _PACKED.size:
            raise HistogramError(f"{len(raw)} bytes are too short for packed buckets")
        n, n_wide_deltas, n_wide_counts, zero = _PACKED.unpack_from(raw)
        at = [_PACKED.size, _PACKED.size + n, _PACKED.size + 2 * n, _PACKED.size + 2 * n + 2 * n_wide_deltas]
        if zero or not n or len(raw) != at[3] + 4 * n_wide_counts:
            raise HistogramError(f"packed buckets of {len(raw)} bytes do not match their header")
        parts.append((n, raw[at[0] : at[1]], raw[at[1] : at[2]], raw[at[2] : at[3]], raw[at[3] :]))
    lengths = [p[0] for p in parts]
    total = sum(lengths)
    if not total:
        return [EMPTY] * len(rows)
    deltas = np.frombuffer(b"".join([p[1] for p in parts]), np.uint8).astype(_INDEX)
    counts = np.frombuffer(b"".join([p[2] for p in parts]), np.uint8).astype(_COUNT)
    wide_deltas = np.frombuffer(b"".join([p[3] for p in parts]), "<u2")
    wide_counts = np.frombuffer(b"".join([p[4] for p in parts]), "<u4")
    _widen(deltas, wide_deltas)
    _widen(counts, wide_counts)
    firsts = np.fromiter(itertools.accumulate(lengths[:-1], initial=0), _INDEX, len(lengths))
    firsts = firsts[np.asarray(lengths) > 0]
    indices = np.cumsum(deltas)
    indices -= np.repeat(indices[firsts] - deltas[firsts], [n for n in lengths if n])  # each row from 0
    deltas[firsts] = 1  # a row's first delta may be 0 (bucket 0); the others may not
    if indices.max() >= COUNTS_LEN or deltas.min() <= 0 or counts.min() <= 0:
        raise HistogramError("packed buckets out of range, not ascending, or with an empty bucket")
    out, start = [], 0
    for n, raw in zip(lengths, rows):
        out.append(Histogram(indices[start : start + n], counts[start : start + n], packed=bytes(raw)) if n else EMPTY)
        start += n
    return out


@dataclass(frozen=True)
class Summaries:
    """Figures of many histograms computed at once, one array element per histogram, each as
    its Histogram method would give it (µs): `percentiles[i, j]` is histogram i's value at
    the j-th percent. A thousand agents' rows cost a dozen numpy calls, not a thousand."""

    mean: np.ndarray
    stddev: np.ndarray
    min_value: np.ndarray
    max_value: np.ndarray
    percentiles: np.ndarray


def summaries(histograms: list[Histogram], percents: Iterable[float]) -> Summaries:
    """Mean, standard deviation, minimum, maximum and percentiles of non-empty histograms."""
    percents = np.asarray(list(percents), dtype=np.float64)
    if not histograms:
        return Summaries(*(np.empty(0),) * 4, np.empty((0, len(percents))))
    parts = [h._arrays() for h in histograms]
    lengths = np.fromiter((len(i) for i, _ in parts), np.int64, len(parts))
    if not lengths.all():
        raise ValueError("summaries() takes non-empty histograms only")
    indices = np.concatenate([i for i, _ in parts])
    counts = np.concatenate([c for _, c in parts])
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    ends = starts + lengths
    cumulative = np.cumsum(counts)
    totals = cumulative[ends - 1] - cumulative[starts] + counts[starts]
    before = cumulative[starts] - counts[starts]  # counted in the histograms ahead of each
    # hdrh's rule as in percentiles(): the first bucket reaching max(1, round(p % of total)).
    targets = np.maximum(1, np.floor(percents[None, :] * totals[:, None] / 100 + 0.5).astype(np.int64))
    at = np.searchsorted(cumulative, before[:, None] + targets)
    at = np.minimum(at, (ends - 1)[:, None])
    n = counts.astype(np.float64)
    values = MEDIAN_VALUE[indices]
    weight = totals.astype(np.float64)
    mean = np.add.reduceat(n * values, starts) / weight
    variance = np.add.reduceat(n * (values - np.repeat(mean, lengths)) ** 2, starts) / weight
    return Summaries(
        mean=mean,
        stddev=np.sqrt(variance),
        min_value=LOWEST_VALUE[indices[starts]],
        max_value=HIGHEST_VALUE[indices[ends - 1]],
        percentiles=HIGHEST_VALUE[indices[at]],
    )


def _widen(narrow: np.ndarray, wide: np.ndarray) -> None:
    """Puts the wide values where the narrow ones are 0, in order."""
    escaped = np.flatnonzero(narrow == 0)
    if len(escaped) != len(wide):
        raise HistogramError(f"packed buckets with {len(escaped)} escapes but {len(wide)} wide values")
    narrow[escaped] = wide


class HistogramSum:
    """Adds many histograms into one dense array: one numpy add per histogram, whatever
    its size. Holds 184 KiB while alive, so use it for a merge, not to keep."""

    __slots__ = ("_dense", "_low", "_high")

    def __init__(self) -> None:
        self._dense = np.zeros(COUNTS_LEN, dtype=_COUNT)
        self._low, self._high = COUNTS_LEN, 0

    def add(self, histogram: Histogram) -> None:
        indices, counts = histogram._arrays()
        if len(indices):
            self._dense[indices] += counts
            self._low = min(self._low, int(indices[0]))
            self._high = max(self._high, int(indices[-1]) + 1)

    def result(self) -> Histogram:
        if self._high <= self._low:
            return EMPTY
        window = self._dense[self._low : self._high]
        indices = np.flatnonzero(window)
        return Histogram(indices + self._low, window[indices])
