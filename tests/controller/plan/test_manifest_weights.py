"""A workload manifest's weights become request weights in exactly its proportions, for any
size of the lab's tree (issue 34: rounded per-mille weights gave the largest class 3.4 % of
the requests instead of 1 % in a tree of scale 1)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from loadfleet.controller.plan.manifest import FileProblems, integer_weights, read_manifest
from loadfleet.targets.workload import SIZE_CLASSES, generate_tree


@pytest.mark.parametrize("scale", [0.25, 1.0, 2.5, 6.0])
def test_each_class_gets_exactly_its_share_and_the_mean_response_is_the_manifests(tmp_path: Path, scale: float):
    tree = generate_tree(tmp_path, scale=scale)
    requests = read_manifest(tmp_path / "manifest.json")
    total = sum(r["weight"] for r in requests)
    for name, _, _, share in SIZE_CLASSES:
        in_class = sum(r["weight"] for r in requests if r["name"] == name)
        assert Fraction(in_class, total) == Fraction(share).limit_denominator(100), name
    size = {f.path: f.bytes for f in tree.files}
    delivered_mean = sum(r["weight"] * size[r["path"]] for r in requests) / total
    declared_mean = sum(f.weight * f.bytes for f in tree.files) / sum(f.weight for f in tree.files)
    assert delivered_mean == pytest.approx(declared_mean, rel=1e-12)


def test_weights_in_any_unit_keep_their_ratios_in_lowest_terms():
    assert integer_weights([35.0, 50.5]) == [70, 101]
    assert integer_weights([0.25, 0.5, 0.0]) == [1, 2, 0]
    assert integer_weights([1 / 3, 2 / 3]) == [1, 2]


def test_ratios_past_the_weight_bound_are_scaled_to_it_and_a_requested_file_stays_requested():
    # Exact ratios would need a largest weight of 10**15, past the schema's bound of 10**9.
    weights = integer_weights([1e9, 0.7, 4e8, 1e-6])
    assert weights[0] == 1_000_000_000 and weights[2] == 400_000_000
    assert weights[1] == 1 and weights[3] == 1  # below one unit of the bound, yet above 0


def test_a_manifest_whose_files_all_weigh_nothing_is_refused(tmp_path: Path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"files": [{"path": "/a.html", "class": "a", "weight": 0}]}))
    with pytest.raises(FileProblems) as info:
        read_manifest(manifest)
    assert "every file has weight 0" in info.value.messages[0]
