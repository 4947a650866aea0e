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
controller reads ten thousand rows a second at 1,000 agents, some ten million buckets:
decoding them, merging histograms and computing their figures are the loops of
`loadfleet_buckets` (proto/native, Rust), one pass over the buckets each, where numpy took a
pass and a temporary array per step and V2 costs tens of microseconds a row (inflate, then
varints). A row read from the wire is only checked; merging and summarizing read its packed
bytes in place, and it is decoded into arrays only if something reads its buckets. The packed
bytes are about twice those of V2.

Values follow hdrh's conventions exactly, so figures do not change with the
representation: a percentile is the highest value equivalent to the first bucket whose
cumulative count reaches the percentile's share, the mean weighs each bucket's median
equivalent value, the maximum is the highest value equivalent to the top bucket.
"""

from __future__ import annotations

import ctypes
import math
import struct
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import loadfleet_buckets as _native  # proto/native: the per-bucket loops
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
        self.array = np.ctypeslib.as_array(self.buffer).view(_COUNT)  # a plain int64 buffer format, not ctypes "<q"
        self.address = ctypes.addressof(self.buffer)
        self.varints = (ctypes.c_byte * (COUNTS_LEN * _MAX_VARINT_BYTES))()  # the encoder's output


_scratch = _Scratch()


def _decode_arrays(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    data = _inflate(raw)
    payload_len = _payload_length(data)
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


def _inflate(raw: bytes) -> bytes:
    """The payload (header and varints) inside the compressed encoding's header and deflate stream."""
    if len(raw) < _EXTERNAL.size:
        raise HistogramError(f"{len(raw)} bytes are too short for an encoded histogram")
    cookie, length = _EXTERNAL.unpack_from(raw)
    if cookie & _COOKIE_BASE_MASK != _COMPRESSED_COOKIE & _COOKIE_BASE_MASK or length != len(raw) - _EXTERNAL.size:
        raise HistogramError("not a V2 compressed histogram (wrong cookie or length)")
    try:
        data = zlib.decompress(memoryview(raw)[_EXTERNAL.size :])
    except zlib.error as exc:
        raise HistogramError(f"the histogram's deflate stream is damaged: {exc}") from exc
    return data


def _payload_length(data: bytes) -> int:
    """The length of the varints after the payload's header, once the header says loadfleet's shape."""
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
    return int(payload_len)


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

    __slots__ = ("_counts", "_indices", "_packed", "_raw")

    def __init__(
        self,
        indices: np.ndarray | None = _NO_INDICES,
        counts: np.ndarray | None = _NO_COUNTS,
        *,
        raw: bytes | None = None,
        packed: bytes | None = None,
    ):
        # indices and counts None: not decoded yet; `raw` holds the V2 encoding (decode()) or
        # `packed` the packed bucket form (decode_buckets), decoded when the counts are read.
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
        """The sum of histograms: one pass over their buckets, however many."""
        parts = [h for h in histograms if h]
        if len(parts) <= 1:
            return parts[0] if parts else EMPTY
        indices, counts = _native.merge([h._native_part() for h in parts])
        return cls(np.frombuffer(indices, _INDEX), np.frombuffer(counts, _COUNT))

    def check(self) -> Histogram:
        """Decodes now; raises HistogramError if the bytes are not a valid histogram."""
        self._arrays()
        return self

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._indices is None or self._counts is None:
            if self._raw is not None:
                self._indices, self._counts = _decode_arrays(self._raw)
            else:
                assert self._packed  # a histogram not decoded yet is made from one of its encodings
                indices, counts, _ = _native.unpack([self._packed])
                self._indices, self._counts = np.frombuffer(indices, _INDEX), np.frombuffer(counts, _COUNT)
        return self._indices, self._counts

    def _native_part(self) -> bytes | tuple[np.ndarray, np.ndarray]:
        """What the native loops read: the packed bytes of a histogram not decoded yet (read
        in place, never decoded into arrays), else the arrays."""
        if self._indices is None and self._raw is None and self._packed:
            return self._packed
        return self._arrays()

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
        return bool(self._raw) or bool(self._packed) or bool(self._indices is not None and len(self._indices))

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

    def subtract(self, other: Histogram) -> Histogram:
        """This histogram without `other`'s values, exactly: counts subtract bucket by
        bucket, buckets left empty are dropped. `other` must be part of this one (merged
        into it before): ValueError when it holds a bucket this one does not, or more in
        one. A rolling window's merge takes its oldest interval out this way
        (analysis/thresholds.py) instead of merging the rest again."""
        if not other:
            return self
        indices, counts = self._arrays()
        taken_indices, taken_counts = other._arrays()
        at = np.searchsorted(indices, taken_indices)
        found = at < len(indices)
        if not found.all() or not np.array_equal(indices[at], taken_indices):
            raise ValueError("cannot subtract a histogram with values in buckets this one does not hold")
        left = counts.copy()
        left[at] -= taken_counts
        if (left < 0).any():
            raise ValueError("cannot subtract a histogram with more values in a bucket than this one holds")
        kept = left != 0
        if kept.all():
            return Histogram(indices.copy(), left)
        return Histogram(indices[kept], left[kept]) if kept.any() else EMPTY

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
    """Histograms from the packed bucket forms of many rows (a report's), checked in one pass:
    HistogramError if any is malformed (a length that does not match its header, indices out
    of range or not ascending, empty buckets, escapes without wide values). Their buckets are
    decoded when first read: most rows are only merged and summarized, and the native loops
    read the packed bytes in place (`_native_part`)."""
    rows = list(rows)
    try:
        _native.check(rows)
    except ValueError as exc:
        raise HistogramError(str(exc)) from exc
    return [Histogram(None, None, packed=raw) if raw else EMPTY for raw in rows]


@dataclass(frozen=True)
class Summaries:
    """Figures of many histograms computed at once, one array element per histogram, each as
    its Histogram method would give it (µs): `percentiles[i, j]` is histogram i's value at
    the j-th percent. A thousand agents' rows cost one native pass over their buckets."""

    mean: np.ndarray
    stddev: np.ndarray
    min_value: np.ndarray
    max_value: np.ndarray
    percentiles: np.ndarray


def summaries(histograms: list[Histogram], percents: Iterable[float]) -> Summaries:
    """Mean, standard deviation, minimum, maximum and percentiles of non-empty histograms."""
    percents = [float(p) for p in percents]
    # ValueError from the native loop for an empty histogram (it checks each as it reads it).
    mean, stddev, lowest, highest, values = _native.summarize([h._native_part() for h in histograms], percents)
    return Summaries(
        mean=np.frombuffer(mean, np.float64),
        stddev=np.frombuffer(stddev, np.float64),
        min_value=np.frombuffer(lowest, np.int64),
        max_value=np.frombuffer(highest, np.int64),
        percentiles=np.frombuffer(values, np.int64).reshape(len(histograms), len(percents)),
    )
