import hashlib
import json

import pytest

from loadfleet.targets.workload import SIZE_CLASSES, WorkloadSpec, generate, generate_tree


def test_same_seed_gives_an_identical_tree(tmp_path):
    a = generate_tree(tmp_path / "a", scale=0.5, seed=3)
    b = generate_tree(tmp_path / "b", scale=0.5, seed=3)
    assert (tmp_path / "a/manifest.json").read_text() == (tmp_path / "b/manifest.json").read_text()
    assert a.total_bytes == b.total_bytes > 0
    c = generate_tree(tmp_path / "c", scale=0.5, seed=4)
    assert [f.sha256 for f in c.files] != [f.sha256 for f in a.files]


def test_files_match_the_manifest_and_their_class(tmp_path):
    generate_tree(tmp_path, scale=0.25, seed=1)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    bounds = {name: (low, high) for name, low, high, _ in SIZE_CLASSES}
    for entry in manifest["files"]:
        content = (tmp_path / entry["path"].lstrip("/")).read_bytes()
        assert len(content) == entry["bytes"]
        assert hashlib.sha256(content).hexdigest() == entry["sha256"]
        low, high = bounds[entry["class"]]
        assert low <= entry["bytes"] <= high
    shares = {}
    for entry in manifest["files"]:
        shares[entry["class"]] = shares.get(entry["class"], 0) + entry["weight"]
    assert abs(sum(shares.values()) - 1) < 1e-9
    assert abs(shares["class1"] - 0.5) < 1e-9


@pytest.mark.parametrize(
    "spec, n_files, size",
    [
        (WorkloadSpec(kind="single", bytes=5_000, seed=2), 1, 5_000),
        (WorkloadSpec(kind="files30k", count=7, seed=2), 7, 30 * 1_024),
        (WorkloadSpec(kind="files100k", count=3, seed=2), 3, 100 * 1_024),
    ],
)
def test_file_sets_are_exact_deterministic_and_in_the_manifest_format(tmp_path, spec, n_files, size):
    generate(tmp_path / "a", spec)
    generate(tmp_path / "b", spec)
    manifest = json.loads((tmp_path / "a/manifest.json").read_text())
    assert manifest == json.loads((tmp_path / "b/manifest.json").read_text())
    assert spec.matches(manifest) and not WorkloadSpec(kind=spec.kind, seed=3).matches(manifest)
    assert len(manifest["files"]) == n_files and manifest["total_bytes"] == n_files * size
    assert abs(sum(f["weight"] for f in manifest["files"]) - 1) < 1e-9
    for entry in manifest["files"]:
        content = (tmp_path / "a" / entry["path"].lstrip("/")).read_bytes()
        assert len(content) == entry["bytes"] == size
        assert hashlib.sha256(content).hexdigest() == entry["sha256"]
        assert entry["class"] == spec.kind
    bodies = {(tmp_path / "a" / e["path"].lstrip("/")).read_bytes() for e in manifest["files"]}
    assert len(bodies) == n_files  # distinct files, not one file copied


def test_a_tree_manifest_records_its_kind(tmp_path):
    generate(tmp_path, WorkloadSpec(scale=0.25, seed=6))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert (manifest["kind"], manifest["seed"], manifest["scale"]) == ("tree", 6, 0.25)
    assert WorkloadSpec(scale=0.25, seed=6).matches(manifest)
