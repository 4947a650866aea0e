"""Rows of a feed as ranges of the file's row indices: [start, end), start included.

An engine takes its slice of a unique feed in order, so the rows it took in an interval are
one range; merging (an agent's engines, the controller's agents, a run's intervals) joins
touching and overlapping ranges, so a set of rows taken by N engines is at most N ranges.
"""

from __future__ import annotations

from collections.abc import Iterable


def join_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """`ranges` sorted, empty ones dropped, touching and overlapping ones joined."""
    joined: list[tuple[int, int]] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    return joined


def count_rows(ranges: Iterable[tuple[int, int]]) -> int:
    """Rows in joined ranges."""
    return sum(end - start for start, end in ranges)


def split_rows(start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """[start, end) in `parts` contiguous slices whose sizes differ by at most one, the larger
    first (the exact split budgets get, with equal weights)."""
    size, extra = divmod(end - start, parts)
    slices = []
    for i in range(parts):
        length = size + (1 if i < extra else 0)
        slices.append((start, start + length))
        start += length
    return slices
