"""Honest analysis of a sweep: the knee of each number of servers and the Universal
Scalability Law fit, over the steps whose generators kept up, each with a sentence saying
what it could and could not tell.

Steps judged invalid (genbound.py: a generator ran out of CPU, descriptors or ports, or
sent late with connections free) measure the generators, not the targets: both analyses
leave them out and say which. Repetitions of a level give the knee its confidence
(knee.py) and the fit more points (usl.py).

The fit's N is the number of servers when the sweep varies it (X: each count's best level,
every repetition of it a point), else the level when it is a concurrency (clients or
users; every step a point). Requests/s (open model) are not a concurrency: no fit then.

In a plan with scenarios, a step's point (throughput, p99, errors) is its swept scenario's
(`StepResult.curve_point`): the other scenarios' constant load is background, not the curve.

Where monitors saw a saturated resource (bottleneck.py) at the knee's level or the level
after it, the knee's note names it; without a knee, the note names the first saturated
resource of the sweep, with its step.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadfleet.controller.analysis.bottleneck import find_bottleneck
from loadfleet.controller.analysis.knee import Knee, KneeRule, KneeSearch, LevelPoint, search_knee
from loadfleet.controller.analysis.scaling import ServerScaling, UslResult, server_scaling
from loadfleet.controller.analysis.steps import LevelSummary, level_summaries
from loadfleet.controller.analysis.usl import NotEnoughPoints, fit_usl
from loadfleet.controller.model.load import LoadModel
from loadfleet.controller.model.stepresult import StepResult
from loadfleet.controller.model.verdict import Validity


@dataclass(frozen=True)
class Analysis:
    levels: tuple[LevelSummary, ...]  # every step's level, left-out ones included (tables)
    # The knee of each server count over the whole sweep (during the run a knee is looked
    # for as each level ends; later levels can show that a dip was no knee).
    knees: tuple[Knee, ...]
    scalability: tuple[ServerScaling, ...]
    usl: UslResult | None
    notes: tuple[str, ...]  # one sentence per analysis: what it found, or why it cannot tell


def usable(results: list[StepResult]) -> tuple[list[StepResult], list[str]]:
    """The steps that measure the targets, and the names of those left out (invalid)."""
    kept = [r for r in results if r.validity is not Validity.INVALID and r.intervals]
    return kept, [r.name for r in results if r.validity is Validity.INVALID]


def knee_search(results: list[StepResult], servers: int, rule: KneeRule = KneeRule()) -> KneeSearch:
    """The knee of the levels run on `servers` servers, over their valid steps; its note
    names the steps left out."""
    search, left = _knee_search(results, servers, rule)
    return KneeSearch(search.knee, search.note + _left_out(left))


def _knee_search(results: list[StepResult], servers: int, rule: KneeRule) -> tuple[KneeSearch, list[str]]:
    kept, left = usable([r for r in results if r.servers == servers])
    search = search_knee(level_points(kept), rule)
    return KneeSearch(search.knee, search.note + _saturated(kept, search.knee)), left


def _saturated(kept: list[StepResult], knee: Knee | None) -> str:
    """What the monitors saw saturated: at the knee's level or the next one (a resource runs
    out at the knee, or just past it when the knee's step only began to queue), or without
    a knee at the first step that saw one; "" when none did."""
    if knee is None:
        looked = kept
    else:
        levels = list(dict.fromkeys(r.level for r in kept))
        at = levels.index(knee.name)
        looked = [r for r in kept if r.level in levels[at : at + 2]]
    for r in looked:
        found = find_bottleneck(r.hosts)
        if found:
            where = "at the knee" if knee is not None and r.level == knee.name else f"at step {r.name}"
            return f"; saturated {where}: {found.describe()}"
    return ""


def level_points(results: list[StepResult]) -> list[LevelPoint]:
    """One point per level (in the order levels first ran) with its repetitions' values."""
    groups: dict[str, list[StepResult]] = {}
    for r in results:
        groups.setdefault(r.level, []).append(r)
    points = []
    for name, rs in groups.items():
        ok_rps, p99_ms, error_pct = zip(*(r.curve_point for r in rs), strict=True)
        points.append(LevelPoint.of(name, rs[0].offered, list(ok_rps), list(p99_ms), list(error_pct)))
    return points


def analyze(results: list[StepResult], model: LoadModel, *, server_sweep: bool) -> Analysis:
    kept, left = usable(results)
    scalability = tuple(server_scaling(level_summaries(kept))) if server_sweep else ()
    notes, knees = [], []
    for servers in sorted({r.servers for r in results}):
        search, _ = _knee_search(results, servers, KneeRule())
        notes.append((f"knee on {servers} server(s): " if server_sweep else "knee: ") + search.note)
        knees += [search.knee] if search.knee else []
    usl, usl_note = usl_fit(kept, model, server_sweep=server_sweep)
    notes.append(usl_note)
    if left:  # said once, for every analysis
        notes.append(
            f"the generator's limit, not the servers': step(s) {', '.join(left)} measured what the load "
            "generators could send, so the knee and the USL fit leave them out"
        )
    return Analysis(tuple(level_summaries(results)), tuple(knees), scalability, usl, tuple(notes))


def usl_fit(kept: list[StepResult], model: LoadModel, *, server_sweep: bool) -> tuple[UslResult | None, str]:
    if server_sweep:
        basis, points = "servers", _server_points(kept)
    elif model is LoadModel.OPEN:
        return None, "USL: no fit: an open model's levels are request rates, not a concurrency"
    else:
        basis = "clients" if model is LoadModel.CLOSED else "users"
        points = [(r.offered, r.curve_point[0]) for r in kept]
    try:
        fit = fit_usl(points)
    except NotEnoughPoints as exc:
        return None, f"USL over {basis}: {exc}"
    return UslResult(basis, fit), f"USL over {basis}: {fit.describe()}"


def _server_points(kept: list[StepResult]) -> list[tuple[float, float]]:
    """Each server count's best level (highest mean ok/s), every repetition of it."""
    by_level: dict[tuple[int, str], list[StepResult]] = {}
    for r in kept:
        by_level.setdefault((r.servers, r.level), []).append(r)
    best: dict[int, list[StepResult]] = {}
    for (servers, _), rs in by_level.items():
        mean = sum(r.curve_point[0] for r in rs) / len(rs)
        if servers not in best or mean > sum(r.curve_point[0] for r in best[servers]) / len(best[servers]):
            best[servers] = rs
    return [(servers, r.curve_point[0]) for servers, rs in sorted(best.items()) for r in rs]


def _left_out(names: list[str]) -> str:
    return f" (left out as generator-bound: {', '.join(names)})" if names else ""
