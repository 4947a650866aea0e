"""A study's design across passes: cluster sizes in a random order per pass (study 004), and
passes added only to stored runs of the same design (the kit resumes across sessions)."""

import json

import pytest
import yaml

from bench.repro.reprokit import runner
from bench.repro.reprokit.studies import STUDIES, Cell, Study

SIZES = [1, 2, 4, 6, 8, 10, 12]


def study(shuffle: bool, sizes=SIZES) -> Study:
    cell = Cell("nginx", {"server": "nginx"}, "plans/p.yaml")
    sweep = {"steps": [1, 64], "step_s": 30, "servers": sizes}
    return Study("999", "t", (), (cell,), sweep, ("clients",), shuffle_servers=shuffle)


@pytest.fixture
def options(tmp_path):
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "p.yaml").write_text(yaml.safe_dump({"name": "p", "sweep": {"steps": [1], "step_s": 5}}))
    return runner.RunOptions(repo=tmp_path, evidence_dir=tmp_path / "evidence", work_dir=tmp_path / "work")


def sizes_of(s: Study, options, pass_no: int) -> list[int]:
    _, plan = runner.derive_plan(s, s.cells[0], options, pass_no)
    return plan["sweep"]["servers"]


def test_each_pass_takes_the_cluster_sizes_in_its_own_reproducible_order(options):
    s = study(shuffle=True)
    orders = [sizes_of(s, options, p) for p in (1, 2, 3)]
    assert all(sorted(o) == SIZES for o in orders)
    assert len({tuple(o) for o in orders}) == 3 and SIZES not in orders
    assert sizes_of(s, options, 2) == orders[1]  # the seed is the study, cell and pass
    assert sizes_of(study(shuffle=False), options, 2) == SIZES


def test_study_004_shuffles_twelve_nodes_per_cell():
    s = STUDIES["004"]
    assert s.shuffle_servers and s.sweep["servers"][-1] == 12
    assert {len(c.targets) for c in s.cells} == {12}


def store(options, sweep: dict, pass_no: int = 1) -> None:
    run = options.evidence_dir / "999" / f"run{pass_no}"
    run.mkdir(parents=True)
    (run / "cell.json").write_text(json.dumps({"cell": "nginx", "pass": pass_no, "sweep": sweep}))


def test_passes_are_added_to_runs_of_the_same_design_in_any_size_order(options):
    s = study(shuffle=True)
    store(options, {"steps": [1, 64], "step_s": 30, "servers": [12, 1, 6, 2, 10, 4, 8]})
    runner.check_stored_design(s, options)  # no error: the same sizes, shuffled


@pytest.mark.parametrize(
    "stored",
    [
        {"steps": [1, 64], "step_s": 5, "servers": SIZES},  # shorter steps
        {"steps": [1, 64], "step_s": 30, "servers": [1, 2, 4, 8]},  # other cluster sizes
        {"steps": [16, 64], "step_s": 30, "servers": SIZES},  # other client levels
    ],
)
def test_passes_of_another_design_are_refused_before_anything_runs(options, stored):
    store(options, stored)
    with pytest.raises(runner.RunnerError, match="passes of two designs cannot be one experiment"):
        runner.run_study(study(shuffle=True), options, lambda line: None)


def three_cells() -> Study:
    cells = tuple(Cell(name, {"server": name}, "plans/p.yaml") for name in ("nginx", "apache", "tomcat"))
    return Study("999", "t", (), cells, {"steps": [1], "step_s": 5}, ("clients",))


def stored_cell(options, name: str, pass_no: int) -> None:
    run = options.evidence_dir / "999" / f"{name}-{pass_no}"
    run.mkdir(parents=True)
    (run / "cell.json").write_text(json.dumps({"cell": name, "pass": pass_no}))


def names(passes: list[tuple[int, tuple[Cell, ...]]]) -> list[tuple[int, list[str]]]:
    return [(number, [c.name for c in cells]) for number, cells in passes]


def test_a_pass_a_session_left_unfinished_is_completed_first_in_its_own_order(options):
    s = three_cells()
    study_dir = options.evidence_dir / "999"
    assert names(runner.passes_to_run(s, study_dir, 2)) == [
        (1, ["nginx", "apache", "tomcat"]),
        (2, ["tomcat", "apache", "nginx"]),
    ]
    stored_cell(options, "nginx", 1)
    stored_cell(options, "apache", 1)
    stored_cell(options, "tomcat", 1)
    stored_cell(options, "tomcat", 2)  # pass 2 runs in reverse: tomcat first, then the session ended
    assert names(runner.passes_to_run(s, study_dir, 1)) == [(2, ["apache", "nginx"])]
    assert names(runner.passes_to_run(s, study_dir, 2)) == [
        (2, ["apache", "nginx"]),
        (3, ["nginx", "apache", "tomcat"]),
    ]
    stored_cell(options, "apache", 2)
    stored_cell(options, "nginx", 2)
    assert names(runner.passes_to_run(s, study_dir, 1)) == [(3, ["nginx", "apache", "tomcat"])]
