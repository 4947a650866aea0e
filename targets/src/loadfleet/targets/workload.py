"""A deterministic WebBench-style workload tree and its manifest.

Files come in four size classes, as in the WebBench and SPECweb static workloads, and
are requested in the classes' proportions: most requests are small, a few are large.
The same seed and scale always give byte-identical files, so a run can be repeated on
another machine and a test can check bodies exactly.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

# (class name, smallest bytes, largest bytes, share of requests)
SIZE_CLASSES = (
    ("class0", 100, 900, 0.35),
    ("class1", 1_024, 9 * 1_024, 0.50),
    ("class2", 10 * 1_024, 90 * 1_024, 0.14),
    ("class3", 100 * 1_024, 900 * 1_024, 0.01),
)
FILES_PER_CLASS = 9
BASE_DIRECTORIES = 4
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class TreeFile:
    path: str
    bytes: int
    # "class" is a keyword in Python; the manifest's field is named "class".
    size_class: str
    weight: float
    sha256: str


@dataclass(frozen=True)
class Manifest:
    files: list[TreeFile]
    seed: int
    scale: float

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def to_json(self) -> dict:
        files = []
        for f in self.files:
            entry = asdict(f)
            entry["class"] = entry.pop("size_class")
            files.append(entry)
        return {"seed": self.seed, "scale": self.scale, "total_bytes": self.total_bytes, "files": files}


def generate_tree(docroot: Path, *, scale: float = 1.0, seed: int = 1) -> Manifest:
    """Writes the tree under `docroot` (directories dir0..dirN) and its manifest.json."""
    if scale <= 0:
        raise ValueError("scale must be above 0")
    rng = random.Random(seed)
    directories = max(1, round(BASE_DIRECTORIES * scale))
    per_class_files = directories * FILES_PER_CLASS
    files = []
    for d in range(directories):
        for name, low, high, share in SIZE_CLASSES:
            for i in range(FILES_PER_CLASS):
                size = low + (high - low) * i // (FILES_PER_CLASS - 1)
                content = _content(rng, size)
                path = f"/dir{d}/{name}_{i}.html"
                target = docroot / path.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
                files.append(TreeFile(path, size, name, share / per_class_files, hashlib.sha256(content).hexdigest()))
    (docroot / "index.html").write_text("<html><body>loadfleet lab</body></html>\n")
    manifest = Manifest(files, seed, scale)
    (docroot / MANIFEST).write_text(json.dumps(manifest.to_json(), indent=1) + "\n")
    return manifest


def read_manifest(docroot: Path) -> dict | None:
    try:
        return json.loads((docroot / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def _content(rng: random.Random, size: int) -> bytes:
    """Printable text of exactly `size` bytes (compressible like real pages, not zeros)."""
    words = [rng.choice(_WORDS) for _ in range(size // 4 + 1)]
    return " ".join(words).encode()[:size]


_WORDS = ("load", "fleet", "cluster", "server", "client", "latency", "request", "response",
          "throughput", "nginx", "bench", "web", "tree", "file", "byte", "http")
