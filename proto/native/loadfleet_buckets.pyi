"""The per-bucket loops of loadfleet.wire.histogram (src/lib.rs). Arrays come back as bytes
of native-endian int64 or float64, for numpy's frombuffer; histograms go in as (indices,
counts) pairs of contiguous int64 arrays or as their packed bucket bytes (read in place)."""

from collections.abc import Sequence

from numpy.typing import NDArray

Pair = tuple[NDArray, NDArray]

def unpack(rows: list[bytes]) -> tuple[bytes, bytes, list[int]]:
    """Indices and counts of packed-bucket rows one after the other, and each row's length."""

def check(rows: list[bytes]) -> None:
    """ValueError unless every row is well-formed packed buckets (b"" is the empty histogram)."""

def merge(parts: list[Pair | bytes]) -> tuple[bytes, bytes]:
    """Indices and counts of the histograms' sum; a histogram is a pair or its packed bytes."""

def summarize(parts: list[Pair | bytes], percents: Sequence[float]) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """Means, standard deviations (float64), minimums, maximums and percentiles (int64, one row
    of `percents` per histogram) of non-empty histograms."""
