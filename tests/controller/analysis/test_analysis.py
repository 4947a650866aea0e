"""The knee and the USL fit over a sweep's steps: invalid steps left out, and said so."""

from __future__ import annotations

import random

import pytest

from loadfleet.controller.analysis.sweep import analyze, knee_search
from loadfleet.controller.analysis.usl import usl
from loadfleet.controller.model.load import LoadModel
from loadfleet.controller.model.verdict import Validity
from support.stepresults import step


def test_an_invalid_step_is_left_out_of_the_knee_and_named():
    # s3's generators ran out: its flat throughput and high p99 are theirs. Without it the
    # curve keeps up to s4, where the servers give out.
    results = [
        step("s1", 100, 100, 5),
        step("s2", 200, 200, 5.5),
        step("s3", 300, 180, 400, validity=Validity.INVALID),
        step("s4", 400, 395, 6),
        step("s5", 500, 400, 90),
        step("s6", 600, 400, 300),
    ]
    found = knee_search(results, 1)
    assert found.knee.name == "s5"
    assert found.note.endswith("(left out as generator-bound: s3)")
    assert knee_search(results[:3], 1).knee is None  # with s3 counted it would be the knee
    assert knee_search([*results[:2], step("s3", 300, 180, 400)], 1).knee.name == "s3"


def test_a_suspect_step_stays_in():
    results = [
        step("s1", 100, 100, 5),
        step("s2", 200, 200, 5.5),
        step("s3", 300, 250, 300, validity=Validity.SUSPECT),
        step("s4", 400, 250, 700),
    ]
    assert knee_search(results, 1).knee.name == "s3"


def test_three_cluster_sizes_say_not_enough_points():
    results = [step(f"k{k}-s1", 10, 1000 * k**0.9, 5, servers=k) for k in (1, 2, 4)]
    found = analyze(results, LoadModel.CLOSED, server_sweep=True)
    assert found.usl is None
    assert "USL over servers: not enough points: 3 distinct size(s)" in found.notes[-1]
    assert [s.servers for s in found.scalability] == [1, 2, 4]


def test_a_server_sweep_with_repetitions_fits_within_its_intervals_and_leaves_invalid_sizes_out():
    rng = random.Random(5)
    sigma, kappa, lam = 0.1, 0.01, 800.0
    results = [
        step(
            f"k{k}-s1" + (f"r{r}" if r > 1 else ""),
            10,
            usl(k, sigma, kappa, lam) * (1 + rng.gauss(0, 0.02)),
            5,
            servers=k,
            rep=r,
        )
        for k in (1, 2, 3, 4, 6, 8)
        for r in (1, 2, 3)
    ]
    results.append(step("k12-s1", 10, 50.0, 5, servers=12, validity=Validity.INVALID))  # would drag κ up
    found = analyze(results, LoadModel.CLOSED, server_sweep=True)
    fit = found.usl.fit
    assert found.usl.basis == "servers" and fit.sizes == 6 and fit.points == 18
    assert fit.sigma_ci[0] <= sigma <= fit.sigma_ci[1] and fit.kappa_ci[0] <= kappa <= fit.kappa_ci[1]
    # The steps left out are said once, in a note of their own, not after each analysis.
    *analyses, left = found.notes
    assert analyses[-1].startswith("USL over servers: σ = ")
    assert left.startswith("the generator's limit, not the servers': step(s) k12-s1 measured")
    assert not any("k12-s1" in note for note in analyses)


def test_an_open_model_gets_no_usl_fit_over_rates():
    results = [step(f"s{i}", 100.0 * i, 100.0 * i, 5) for i in range(1, 7)]
    found = analyze(results, LoadModel.OPEN, server_sweep=False)
    assert found.usl is None and "not a concurrency" in found.notes[-1]
    assert found.notes[0].startswith("knee: no knee")


@pytest.mark.parametrize("model, basis", [(LoadModel.CLOSED, "clients"), (LoadModel.USERS, "users")])
def test_a_concurrency_sweep_fits_over_its_levels(model, basis):
    results = [step(f"s{i}", n, usl(n, 0.05, 0.001, 500.0), 5) for i, n in enumerate((1, 2, 4, 8, 16, 32), start=1)]
    found = analyze(results, model, server_sweep=False)
    assert found.usl.basis == basis and found.usl.fit.sigma == pytest.approx(0.05, rel=0.05)


def test_the_summary_s_knee_is_judged_over_the_whole_sweep():
    # After s2 alone, s2 looked like a knee; s3 and s4 show it was a dip.
    results = [step("s1", 100, 100, 5), step("s2", 200, 130, 10), step("s3", 300, 300, 6), step("s4", 400, 400, 7)]
    assert knee_search(results[:2], 1).knee.name == "s2"
    assert analyze(results, LoadModel.OPEN, server_sweep=False).knees == ()
