"""A disk spool of line-protocol batches, replayed oldest first.

Each batch is one file, named by a sequence number so that order survives a restart
of the controller. A batch leaves the spool only after it was written to InfluxDB.
"""
from __future__ import annotations

import os
from pathlib import Path


class Spool:
    def __init__(self, directory: Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        existing = self._files()
        self._next = int(existing[-1].stem) + 1 if existing else 1

    def push(self, lines: list[str]) -> None:
        path = self.directory / f"{self._next:012d}.lp"
        self._next += 1
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)

    def oldest(self) -> tuple[Path, list[str]] | None:
        files = self._files()
        if not files:
            return None
        return files[0], files[0].read_text().splitlines()

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def __len__(self) -> int:
        return len(self._files())

    def points(self) -> int:
        return sum(len(p.read_text().splitlines()) for p in self._files())

    def _files(self) -> list[Path]:
        return sorted(self.directory.glob("*.lp"))
