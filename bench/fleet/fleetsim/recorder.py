"""Latencies recorded by the simulator and merged across simulator processes.

Each process records into HDR histograms (µs, 1 µs..1 h, 3 significant digits, the
project's bounds) and writes them encoded into its results file; the bench merges them
exactly, so percentiles over the whole fleet are never averaged. Memory is fixed per
recorder, whatever the length of the run. `MaxSeries` keeps the worst value per time
bucket so the bench can show when lateness happened (one entry per bucket of the run).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hdrh.histogram import HdrHistogram

from loadfleet.wire.stats import HIGHEST_US, LOWEST_US, SIGNIFICANT_DIGITS


@dataclass(frozen=True)
class LatencySummary:
    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float

    def as_dict(self) -> dict:
        return {"count": self.count, "p50_ms": self.p50_ms, "p99_ms": self.p99_ms, "max_ms": self.max_ms}


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


class LatencyRecorder:
    def __init__(self) -> None:
        self._histogram = new_histogram()

    def record_s(self, seconds: float) -> None:
        self._histogram.record_value(min(HIGHEST_US, max(LOWEST_US, round(seconds * 1_000_000))))

    def encoded(self) -> str:
        """Base64 of the V2 compressed encoding; "" when nothing was recorded."""
        if self._histogram.get_total_count() == 0:
            return ""
        return self._histogram.encode().decode()

    def summary(self) -> LatencySummary:
        return summarize(self._histogram)


def merge_encoded(encoded: Iterable[str]) -> LatencySummary:
    merged = new_histogram()
    for text in encoded:
        if text:
            merged.add(HdrHistogram.decode(text.encode()))
    return summarize(merged)


def summarize(histogram: HdrHistogram) -> LatencySummary:
    if histogram.get_total_count() == 0:
        return LatencySummary(0, 0.0, 0.0, 0.0)
    return LatencySummary(
        count=histogram.get_total_count(),
        p50_ms=round(histogram.get_value_at_percentile(50) / 1000, 3),
        p99_ms=round(histogram.get_value_at_percentile(99) / 1000, 3),
        max_ms=round(histogram.get_max_value() / 1000, 3),
    )


class MaxSeries:
    """The largest value seen per `bucket_s` seconds of wall-clock time."""

    def __init__(self, bucket_s: int = 10):
        self.bucket_s = bucket_s
        self._max: dict[int, float] = {}

    def record(self, at_s: float, value: float) -> None:
        bucket = int(at_s // self.bucket_s) * self.bucket_s
        if value > self._max.get(bucket, float("-inf")):
            self._max[bucket] = value

    def as_dict(self) -> dict[str, float]:
        return {str(k): round(v, 3) for k, v in sorted(self._max.items())}


def merge_series(series: Iterable[dict[str, float]]) -> dict[int, float]:
    merged: dict[int, float] = {}
    for one in series:
        for key, value in one.items():
            merged[int(key)] = max(value, merged.get(int(key), float("-inf")))
    return dict(sorted(merged.items()))
