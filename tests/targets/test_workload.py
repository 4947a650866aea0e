import hashlib
import json

from loadfleet.targets.workload import SIZE_CLASSES, generate_tree


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
