"""Deterministic workloads for the lab's docroot, each with a manifest in one format.

- `tree`: WebBench-style files in four size classes, requested in the classes' proportions
  (most requests are small, a few are large); directories = 4 x scale.
- `single`: one page of `bytes` bytes (the classic single-page test).
- `files30k`, `files100k`: `count` files of exactly 30 KiB or 100 KiB, requested equally.

The same parameters always give byte-identical files, so a run can be repeated on another
machine and a test can check bodies exactly.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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

WORKLOAD_KINDS = ("tree", "single", "files30k", "files100k")
DEFAULT_KIND = "tree"
DEFAULT_SCALE = 1.0
DEFAULT_SEED = 1
DEFAULT_SINGLE_BYTES = 4_096
DEFAULT_FILE_COUNT = 100
FILE_SET_BYTES = {"files30k": 30 * 1_024, "files100k": 100 * 1_024}
SINGLE_PAGE = "/single.html"


@dataclass(frozen=True)
class WorkloadSpec:
    """Which workload to generate; only the fields of its kind matter."""

    kind: str = DEFAULT_KIND
    seed: int = DEFAULT_SEED
    scale: float = DEFAULT_SCALE
    bytes: int = DEFAULT_SINGLE_BYTES
    count: int = DEFAULT_FILE_COUNT

    def params(self) -> dict[str, Any]:
        """The fields that define the files; a manifest records them, so a docroot is reused only
        when they are unchanged."""
        by_kind: dict[str, dict[str, Any]] = {"tree": {"scale": self.scale}, "single": {"bytes": self.bytes}}
        return {"kind": self.kind, "seed": self.seed, **by_kind.get(self.kind, {"count": self.count})}

    def matches(self, manifest: dict[str, Any] | None) -> bool:
        return manifest is not None and all(manifest.get(k) == v for k, v in self.params().items())


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
    scale: float = DEFAULT_SCALE
    params: dict[str, Any] | None = None  # WorkloadSpec.params(); None for the tree (kind, seed, scale)

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def to_json(self) -> dict[str, Any]:
        files = []
        for f in self.files:
            entry = asdict(f)
            entry["class"] = entry.pop("size_class")
            files.append(entry)
        params = self.params or {"kind": "tree", "seed": self.seed, "scale": self.scale}
        return {**params, "total_bytes": self.total_bytes, "files": files}


def generate(docroot: Path, spec: WorkloadSpec) -> Manifest:
    """Writes the files of `spec` under `docroot` and its manifest.json."""
    if spec.kind == "tree":
        return generate_tree(docroot, scale=spec.scale, seed=spec.seed)
    if spec.kind == "single":
        return generate_single(docroot, size=spec.bytes, seed=spec.seed)
    if spec.kind in FILE_SET_BYTES:
        return generate_file_set(docroot, spec.kind, count=spec.count, seed=spec.seed)
    raise ValueError(f"workload kind '{spec.kind}' is not one of {', '.join(WORKLOAD_KINDS)}")


def generate_single(docroot: Path, *, size: int = DEFAULT_SINGLE_BYTES, seed: int = DEFAULT_SEED) -> Manifest:
    """One page of `size` bytes at /single.html."""
    if size < 1:
        raise ValueError("size must be at least 1 byte")
    files = [_write(docroot, SINGLE_PAGE, _content(random.Random(seed), size), "single", 1.0)]
    spec = WorkloadSpec(kind="single", seed=seed, bytes=size)
    return _finish(docroot, Manifest(files, seed, params=spec.params()))


def generate_file_set(
    docroot: Path, kind: str, *, count: int = DEFAULT_FILE_COUNT, seed: int = DEFAULT_SEED
) -> Manifest:
    """`count` files of exactly 30 KiB (files30k) or 100 KiB (files100k) at /<kind>/file<i>.html."""
    if count < 1:
        raise ValueError("count must be at least 1")
    size, rng = FILE_SET_BYTES[kind], random.Random(seed)
    files = [_write(docroot, f"/{kind}/file{i}.html", _content(rng, size), kind, 1 / count) for i in range(count)]
    spec = WorkloadSpec(kind=kind, seed=seed, count=count)
    return _finish(docroot, Manifest(files, seed, params=spec.params()))


def _write(docroot: Path, path: str, content: bytes, size_class: str, weight: float) -> TreeFile:
    target = docroot / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    return TreeFile(path, len(content), size_class, weight, hashlib.sha256(content).hexdigest())


def _finish(docroot: Path, manifest: Manifest) -> Manifest:
    (docroot / "index.html").write_text("<html><body>loadfleet lab</body></html>\n")
    (docroot / MANIFEST).write_text(json.dumps(manifest.to_json(), indent=1) + "\n")
    return manifest


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
                files.append(
                    _write(docroot, f"/dir{d}/{name}_{i}.html", _content(rng, size), name, share / per_class_files)
                )
    return _finish(docroot, Manifest(files, seed, scale))


def read_manifest(docroot: Path) -> dict[str, Any] | None:
    try:
        manifest: dict[str, Any] = json.loads((docroot / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest


def _content(rng: random.Random, size: int) -> bytes:
    """Printable text of exactly `size` bytes (compressible like real pages, not zeros)."""
    words = [rng.choice(_WORDS) for _ in range(size // 4 + 1)]
    return " ".join(words).encode()[:size]


_WORDS = (
    "load",
    "fleet",
    "cluster",
    "server",
    "client",
    "latency",
    "request",
    "response",
    "throughput",
    "nginx",
    "bench",
    "web",
    "tree",
    "file",
    "byte",
    "http",
)
