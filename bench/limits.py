"""The process limit every bench raises before it starts children."""

from __future__ import annotations

import resource


def raise_fd_limit(needed: int) -> None:
    """This process's open-files limit raised to `needed` (children inherit it: a generator,
    nginx or the controller holds thousands of sockets); to the hard limit when `needed` is
    above it and the hard limit cannot be raised (only root can)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, needed))
            return
        except (ValueError, OSError):
            needed = hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
