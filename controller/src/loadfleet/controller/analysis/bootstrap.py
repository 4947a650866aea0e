"""The moving-block bootstrap (Künsch 1989) over a run's intervals, as multiplicity matrices.

A resample of a run's n intervals (in time order) is ⌈n / L⌉ blocks of L consecutive
intervals, each block's start drawn uniformly from the n − L + 1 possible starts, the
concatenation cut to n intervals. Blocks keep the autocorrelation of neighbouring intervals
(a GC pause, a cache warming up, a queue draining span several) that drawing single intervals
would break, and with it the variance of a run's figures that such correlation adds.

A resample is given as how often it holds each interval: row b of a (B × n) matrix of
multiplicities. Every figure of the resample is then a weighted sum over intervals, and for
all resamples at once a matrix product (analysis/gate.py): the histograms of the chosen
intervals merge exactly, as the run's own figures were merged.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence

import numpy as np

RESAMPLES = 2000  # B: the percentile interval's 2.5 % and 97.5 % ends rest on 50 resamples each
CONFIDENCE = 0.95
# Resamples computed at once: bounds the (chunk × n) multiplicities and the (chunk × K) merged
# buckets in memory (for a 1 h run of 3,600 intervals, 256 × 3,600 × 8 B = 7 MB each).
CHUNK = 256


def block_length(n: int) -> int:
    """⌈n^(1/3)⌉ intervals (at least 1): the rate that keeps the bootstrap's variance estimate
    consistent for a weakly dependent series (Hall, Horowitz and Jing 1995)."""
    length = 1
    while length**3 < n:  # in integers: 27 ** (1 / 3) is 3.0000000000000004 in floating point
        length += 1
    return length


def multiplicities(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """A (resamples × n) matrix: how often each of n intervals is in each resample (each row
    sums to n)."""
    if n < 1:
        return np.zeros((resamples, 0), dtype=np.int64)
    length = block_length(n)
    blocks = math.ceil(n / length)
    starts = rng.integers(0, n - length + 1, size=(resamples, blocks))
    chosen = (starts[:, :, None] + np.arange(length)).reshape(resamples, blocks * length)[:, :n]
    flat = chosen + (np.arange(resamples) * n)[:, None]
    return np.bincount(flat.ravel(), minlength=resamples * n).reshape(resamples, n)


def chunks(rng: np.random.Generator, n: int, resamples: int = RESAMPLES) -> Iterator[np.ndarray]:
    """The multiplicity matrix of `resamples` resamples, CHUNK rows at a time (the same rows,
    in the same order, for the same generator state)."""
    for first in range(0, resamples, CHUNK):
        yield multiplicities(rng, n, min(CHUNK, resamples - first))


def two_level_chunks(
    rng: np.random.Generator, sizes: Sequence[int], resamples: int = RESAMPLES
) -> Iterator[np.ndarray]:
    """A two-level (hierarchical) bootstrap of several runs, CHUNK rows at a time: each row
    draws len(sizes) runs with replacement (Davison and Hinkley 1997, §3.8), then a
    moving-block resample of each drawn run's intervals (a run drawn twice gets two).
    Columns: the runs' intervals side by side (sizes[0] of the first run's, then the second's)."""
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    for first in range(0, resamples, CHUNK):
        rows = min(CHUNK, resamples - first)
        drawn = rng.integers(0, len(sizes), size=(rows, len(sizes)))
        weights = np.zeros((rows, int(offsets[-1])), dtype=np.int64)
        for slot in range(len(sizes)):
            for run, n in enumerate(sizes):
                held = (drawn[:, slot] == run)[:, None]
                weights[:, offsets[run] : offsets[run + 1]] += multiplicities(rng, n, rows) * held
        yield weights


def percentile_interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile interval of bootstrap values: their (1 − c)/2 and (1 + c)/2 quantiles,
    each one of the values (no interpolation, so an infinite value stays one)."""
    tail = round((1 - confidence) / 2, 9)  # 0.025, not 0.025000000000000022 (the 51st of 2,000 values)
    low, high = np.quantile(values, [tail, 1 - tail], method="inverted_cdf")
    return float(low), float(high)


def seed_of(*names: str) -> np.random.SeedSequence:
    """A seed from names (the two runs' ids): the same runs give the same resamples, so the same
    verdict, on every machine; NUL-separated so ("ab", "c") and ("a", "bc") differ."""
    digest = hashlib.sha256("\0".join(names).encode()).digest()
    return np.random.SeedSequence(int.from_bytes(digest[:16], "big"))
