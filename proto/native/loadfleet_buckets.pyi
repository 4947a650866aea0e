"""The per-bucket loops of loadfleet.wire.histogram (src/lib.rs). Arrays come back as bytes
of native-endian int64 or float64, for numpy's frombuffer; histograms go in as (indices,
counts) pairs of contiguous int64 arrays."""

from collections.abc import Sequence

from numpy.typing import NDArray

Pair = tuple[NDArray, NDArray]

def unpack(rows: list[bytes]) -> tuple[bytes, bytes, list[int]]:
    """Indices and counts of packed-bucket rows one after the other, and each row's length."""

def merge(parts: list[Pair]) -> tuple[bytes, bytes]:
    """Indices and counts of the histograms' sum."""

def summarize(parts: list[Pair], percents: Sequence[float]) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """Means, standard deviations (float64), minimums, maximums and percentiles (int64, one row
    of `percents` per histogram) of non-empty histograms."""
