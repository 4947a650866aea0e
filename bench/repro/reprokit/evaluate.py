"""A metric's value over observations: a pure function, no I/O (verdicts.py compares it).

An `Observation` is one step of one stored run: the variables that place it (the cell's, e.g.
setup=varnish, page=static, and the step's level, e.g. users=4000, spawn_rate=800), its figures
(mean_ms, ok_rps, ...) and the pass of the interleaved series it belongs to. A figure of a cell is
the mean over every observation of that cell (its repetitions and passes).

Its `grain` says what else it can be (intervals.py makes them): one interval of a run, placed by
the cell's variables and `t` (seconds since the load started), or a whole run (`first_error_s`).
A figure is read from one grain: `first_error_s` from runs; `concurrent_users`, `error_rps` and
any figure with a selector on `t` from intervals (the value at a `t` is the mean over the passes
that have it); every other figure from steps, as before intervals were kept. A selector
`t<first_error_s` compares each interval with the figure of its own run.

`NotEvaluable`, with the reason, when the runs lack what the metric needs (a server that was not
run, a variable or figure loadfleet does not record, a single level where a slope needs two, a
selector that leaves several cells open, only steps that were left out): never a silent value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from .cellmath import arith as _arith
from .cellmath import by_level as _by_level
from .cellmath import cell_var as _cell_var
from .cellmath import of_cells as _of_cells
from .cellmath import onset as _onset
from .cellmath import scalar_of as _scalar
from .cellmath import slope as _slope
from .metric import BinOp, Call, Each, Fig, Num, Sel, VarRef, parse_metric
from .observation import (
    EPSILON,
    CellFails,
    CellSet,
    EmptySelection,
    Grain,
    NotEvaluable,
    Observation,
    fmt,
    number,
    same,
    within,
)
from .strict import Scrutiny, whole_sweeps

__all__ = [
    "CellFails",
    "CellSet",
    "EmptySelection",
    "Grain",
    "NotEvaluable",
    "Observation",
    "Scrutiny",
    "evaluate_metric",
    "grain_of",
    "number",
    "same",
]

_fmt, _within = fmt, within

# Figures computed from ok_rps over a closed-loop client sweep (findings.yaml's header).
DERIVED_OVER_CLIENTS = {"avg_ok_rps": "mean", "max_ok_rps": "max"}
TIME_VAR = "t"

RUN_FIGURES = frozenset({"first_error_s"})  # one value per run
INTERVAL_FIGURES = frozenset({"concurrent_users", "error_rps"})  # only per interval, never per step
ABSENT_FIGURE_REASONS = {
    "concurrent_users": "the runs have no concurrent-users figure (their intervals have no `users` column)",
}


def grain_of(fig: Fig) -> Grain:
    """Which observations a figure is read from (the module's docstring says why)."""
    if fig.name in RUN_FIGURES:
        return Grain.RUN
    if fig.name in INTERVAL_FIGURES or any(sel.var == TIME_VAR for sel in fig.sels):
        return Grain.INTERVAL
    return Grain.STEP


class _Evaluator:
    def __init__(self, observations: list[Observation]):
        self.observations = [o for o in observations if o.usable]
        # A step that failed in its window is left out; one that measured nothing under load is
        # not (it fails its cell), nor is an invalid one (excluded, but counted: `scrutiny`).
        self.left_out = [o for o in observations if o.left_out and not o.fails_cell]
        self.strict_pool = [
            o for o in observations if o.grain is Grain.STEP and not o.usable and o not in self.left_out
        ]
        self.known_vars = {k for o in observations for k in o.vars}
        self.scrutiny = Scrutiny()

    # -- figures ---------------------------------------------------------------------------
    def select(
        self, sels, env: Mapping[str, object], grain: Grain = Grain.STEP, pool: list[Observation] | None = None
    ) -> list[Observation]:
        chosen = [o for o in (self.observations if pool is None else pool) if o.grain is grain]
        for var, value in env.items():
            chosen = [o for o in chosen if var in o.vars and same(o.vars[var], value)]
        scope = chosen  # `max`/`min`: the extreme level run in the study, not in what is left
        applied = [f"{k}={_fmt(v)}" for k, v in env.items()]
        for sel in sels:
            applied.append(sel.text())
            try:
                chosen = self._apply(sel, chosen, scope)
            except EmptySelection as exc:
                raise EmptySelection(
                    f"no {_NOUNS[grain]} with {', '.join(applied)}{exc}{self._left_out_note(env, sels)}"
                ) from None
        return chosen

    def _left_out_note(self, env, sels) -> str:
        """Says so when steps that would match were run but left out (failed, measured nothing)."""
        matching = [o for o in self.left_out if all(k in o.vars and same(o.vars[k], v) for k, v in env.items())]
        for sel in sels:
            if sel.op != "=" or sel.var not in self.known_vars:
                return ""
            if sel.high is not None:
                matching = [o for o in matching if sel.var in o.vars and _within(o.vars[sel.var], sel.low, sel.high)]
            elif sel.low not in ("max", "min"):
                matching = [o for o in matching if sel.var in o.vars and same(o.vars[sel.var], sel.low)]
        if not matching:
            return ""
        reasons = sorted({o.left_out for o in matching})
        return f"; {len(matching)} such step(s) ran but are left out ({'; '.join(reasons)})"

    def _apply(self, sel: Sel, chosen: list[Observation], scope: list[Observation]) -> list[Observation]:
        if sel.var not in self.known_vars:
            raise NotEvaluable(f"no variable {sel.var!r} in the runs (selector {sel.text()})")
        chosen = [o for o in chosen if sel.var in o.vars]
        if sel.op != "=":
            kept = self._compared(sel, chosen)
        elif sel.high is not None:
            kept = [o for o in chosen if _within(o.vars[sel.var], sel.low, sel.high)]
        elif sel.low in ("max", "min"):
            levels = [number(o.vars[sel.var]) for o in scope if sel.var in o.vars]
            if not levels or None in levels:
                raise EmptySelection(f"no numeric levels of {sel.var} for {sel.text()}")
            extreme = max(levels) if sel.low == "max" else min(levels)
            kept = [o for o in chosen if same(o.vars[sel.var], extreme)]
            if not kept:
                raise EmptySelection(f" ({sel.var}={sel.low} is {_fmt(extreme)})")
        else:
            kept = [o for o in chosen if same(o.vars[sel.var], sel.low)]
        if not kept:
            raise EmptySelection("")
        return kept

    def _compared(self, sel: Sel, chosen: list[Observation]) -> list[Observation]:
        """`var<bound` / `var>bound`: the bound a number, or a figure of each observation's own run."""
        if sel.high is not None:
            raise NotEvaluable(f"selector {sel.text()}: a range takes '='")
        bound = self._bound(sel)
        kept = []
        for o in chosen:
            value = number(o.vars[sel.var])
            if value is None:
                raise NotEvaluable(f"selector {sel.text()}: {sel.var}={o.vars[sel.var]} is not a number")
            if (value < bound(o)) if sel.op == "<" else (value > bound(o)):
                kept.append(o)
        return kept

    def _bound(self, sel: Sel):
        constant = number(sel.low)
        if constant is not None:
            return lambda _o: constant
        if sel.low not in RUN_FIGURES:
            raise NotEvaluable(
                f"selector {sel.text()}: {sel.low!r} is neither a number nor a figure of a run "
                f"({', '.join(sorted(RUN_FIGURES))})"
            )
        per_run = {o.run_id: o.figures[sel.low] for o in self.observations if o.grain is Grain.RUN}

        def of_own_run(o: Observation) -> float:
            if o.run_id not in per_run:
                raise NotEvaluable(f"selector {sel.text()}: run {o.run_id!r} has no {sel.low}")
            return per_run[o.run_id]

        return of_own_run

    def figure(self, fig: Fig, env) -> CellSet:
        grain = grain_of(fig)
        if grain is not Grain.STEP and not any(o.grain is grain for o in self.observations):
            raise NotEvaluable(
                f"no per-interval evidence for {fig.text()}: the runs were stored without their intervals "
                f"('{TIME_VAR}', first_error_s)"
            )
        if grain is Grain.RUN and any(sel.var == TIME_VAR for sel in fig.sels):
            raise NotEvaluable(f"{fig.text()}: {fig.name} is a figure of a whole run, it takes no selector on t")
        chosen = self._strict_steps(fig, env) if grain is Grain.STEP else self.select(fig.sels, env, grain)
        base = "ok_rps" if fig.name in DERIVED_OVER_CLIENTS else fig.name
        if grain is Grain.INTERVAL:
            chosen = _with_interval_figure(chosen, base, fig.text())
        missing = [o for o in chosen if base not in o.figures or o.figures[base] is None]
        if missing:
            why = ABSENT_FIGURE_REASONS.get(base, f"no figure {base!r} in the runs")
            raise NotEvaluable(f"{why} ({fig.text()})")
        groups = defaultdict(list)
        for o in chosen:
            groups[tuple(sorted((k, v) for k, v in o.vars.items()))].append(o.figures[base])
        cells = [(key, sum(vals) / len(vals)) for key, vals in sorted(groups.items(), key=str)]
        if fig.name in DERIVED_OVER_CLIENTS:
            cells = self._over_clients(cells, DERIVED_OVER_CLIENTS[fig.name], fig.text())
        return CellSet(tuple(cells), fig.text())

    def _strict_steps(self, fig: Fig, env) -> list[Observation]:
        """The usable steps a figure reads. A step among them that measured no request under load
        fails the cell (CellFails); invalid ones are excluded and counted in `scrutiny`. `max` and
        `min` are the extreme levels run, invalid or not: a top level that is invalid is not
        replaced by a lower one."""
        everything = self.select(fig.sels, env, Grain.STEP, pool=self.observations + self.strict_pool)
        broken = [o for o in everything if o.fails_cell]
        if broken:
            where = ", ".join(f"{k}={_fmt(v)}" for k, v in broken[0].vars.items())
            raise CellFails(f"{fig.text()}: {where}: {broken[0].fails_cell} (run {broken[0].run_id})")
        for o in everything:
            key = id(o)  # the observations outlive the evaluation: their ids stay theirs
            self.scrutiny.read.add(key)
            if o.invalid:
                self.scrutiny.invalid.add(key)
                self.scrutiny.invalid_reasons.add(o.invalid)
            if o.figures.get("lost_after_window") and o.usable:
                self.scrutiny.lost_after.add(key)
        usable = [o for o in everything if o.usable]
        if fig.name in DERIVED_OVER_CLIENTS:
            whole_sweeps(fig, everything, usable)
        if not usable:
            raise NotEvaluable(
                f"every step of {fig.text()} is invalid ({len(everything)} excluded: "
                f"{'; '.join(sorted({o.invalid for o in everything}))})"
            )
        return usable

    @staticmethod
    def _over_clients(cells, how: str, label: str):
        if not any(k == "clients" for key, _ in cells for k, _v in key):
            raise NotEvaluable(f"{label} needs a client sweep (variable 'clients')")
        groups = defaultdict(list)
        for key, value in cells:
            groups[tuple((k, v) for k, v in key if k != "clients")].append(value)
        agg = (lambda v: sum(v) / len(v)) if how == "mean" else max
        return [(key, agg(values)) for key, values in groups.items()]

    # -- expressions -----------------------------------------------------------------------
    def value(self, node, env):
        if isinstance(node, Num):
            return node.value
        if isinstance(node, Fig):
            return self.figure(node, env)
        if isinstance(node, VarRef):
            if node.name in env:
                return number(env[node.name])
            raise NotEvaluable(f"variable {node.name!r} used outside a per-cell expression")
        if isinstance(node, BinOp):
            return self.binop(node, env)
        if isinstance(node, Call):
            return self.call(node, env)
        if isinstance(node, Each):
            return self.each(node, env)
        raise NotEvaluable(f"cannot evaluate {node!r}")

    def scalar(self, node, env) -> float:
        value = self.value(node, env)
        return value.scalar() if isinstance(value, CellSet) else value

    def cellset(self, node, env) -> CellSet:
        value = self.value(node, env)
        if not isinstance(value, CellSet):
            raise NotEvaluable("a function over cells was given a single number")
        return value

    def binop(self, node: BinOp, env):
        left = self.value(node.left, env) if not isinstance(node.left, VarRef) else node.left
        right = self.value(node.right, env) if not isinstance(node.right, VarRef) else node.right
        if isinstance(left, CellSet) and isinstance(right, VarRef):
            return self._per_cell(
                left,
                lambda v, cell: _arith(node.op, v, _cell_var(cell, right.name)),
                f"{left.label}{node.op}{right.name}",
            )
        if isinstance(left, VarRef) or isinstance(right, VarRef):
            return _arith(node.op, self.value(node.left, env), self.value(node.right, env))
        if isinstance(left, CellSet) and not isinstance(right, CellSet):
            return self._per_cell(left, lambda v, _c: _arith(node.op, v, right), left.label)
        if isinstance(right, CellSet) and not isinstance(left, CellSet):
            return self._per_cell(right, lambda v, _c: _arith(node.op, left, v), right.label)
        return _arith(node.op, _scalar(left), _scalar(right))

    @staticmethod
    def _per_cell(cells: CellSet, fn, label: str) -> CellSet:
        return CellSet(tuple((key, fn(value, key)) for key, value in cells.cells), label)

    def call(self, node: Call, env):
        if node.fn in ("ratio", "reduction", "diff"):
            return self._of_pair(node, env)
        cells = self.cellset(node.args[0], env)
        if node.fn in ("max", "mean", "growth"):
            return _of_cells(node, cells)
        return self._over_levels(node, cells, env)

    def _of_pair(self, node: Call, env):
        """ratio, reduction, diff: two figures."""
        a, b = (self.scalar(arg, env) for arg in node.args)
        if node.fn == "diff":
            return a - b
        if abs(b) < EPSILON:
            raise NotEvaluable(f"{node.fn}: the second figure is 0")
        return a / b if node.fn == "ratio" else 1 - a / b

    def _over_levels(self, node: Call, cells: CellSet, env):
        """argmin, argmax, slope, onset: the cells by the levels of the variable `over`."""
        fn, over = node.fn, dict(node.kwargs).get("over")
        levels = _by_level(cells, over)
        if fn in ("argmin", "argmax"):
            run = {_fmt(o.vars[over]) for o in self.select((), env) if over in o.vars}
            missing = sorted(run - {_fmt(level) for level in levels})
            if missing:  # the extreme among what is left would be a silent choice
                raise NotEvaluable(
                    f"{fn} over {over}: no cell of {cells.label} for {', '.join(f'{over}={m}' for m in missing)}"
                )
            pick = min if fn == "argmin" else max
            return pick(levels, key=lambda lvl: levels[lvl])
        numeric = {number(k): v for k, v in levels.items()}
        if None in numeric or len(numeric) < 2:
            raise NotEvaluable(
                f"{fn} over {over} needs at least two numeric levels of {over}; the runs have {len(numeric)}"
            )
        if fn == "slope":
            return _slope(numeric)
        if fn == "onset":
            return _onset(numeric, cells.label, over)
        raise NotEvaluable(f"unknown function {fn}")

    def each(self, node: Each, env):
        levels = sorted(
            {o.vars[node.var] for o in self.select((), env) if node.var in o.vars},
            key=lambda v: (number(v) is None, number(v) or 0, str(v)),
        )
        if not levels:
            raise NotEvaluable(f"no variable {node.var!r} in the runs (@ each {node.var})")
        results, skipped = {}, []
        for level in levels:
            try:
                results[_fmt(level)] = self.value(node.body, {**env, node.var: level})
            except EmptySelection as exc:
                skipped.append(str(exc))
            except NotEvaluable as exc:
                raise NotEvaluable(f"at {node.var}={_fmt(level)}: {exc}") from exc
        if not results:
            raise NotEvaluable(f"no level of {node.var} has the cells: {skipped[0]}")
        return {k: (v.scalar() if isinstance(v, CellSet) else v) for k, v in results.items()}


_NOUNS = {Grain.STEP: "usable step", Grain.INTERVAL: "interval", Grain.RUN: "run"}


def _with_interval_figure(chosen: list[Observation], name: str, label: str) -> list[Observation]:
    """The intervals that have the figure; NotEvaluable when a run has it in none of its intervals
    (an interval that ended no request has no latency, a run stored before a column has no value)."""
    runs = {o.run_id for o in chosen}
    lacking = runs - {o.run_id for o in chosen if o.figures.get(name) is not None}
    if lacking:
        why = ABSENT_FIGURE_REASONS.get(name, f"no figure {name!r} in the runs")
        raise NotEvaluable(f"{why} ({len(lacking)} of {len(runs)} runs lack it; {label})")
    return [o for o in chosen if o.figures.get(name) is not None]


def evaluate_metric(metric: str, observations: list[Observation]):
    """The metric's value over the observations (those left out only explain why a selection is
    empty); NotEvaluable (or MetricSyntaxError) if it has none, CellFails if a cell it reads
    measured nothing under load."""
    return scrutinised_metric(metric, observations)[0]


def scrutinised_metric(metric: str, observations: list[Observation]) -> tuple[object, Scrutiny]:
    """As evaluate_metric, with the steps its figures read and the invalid ones excluded."""
    if not observations:
        _no_runs()
    evaluator = _Evaluator(observations)
    return evaluator.value(parse_metric(metric), {}), evaluator.scrutiny


def _no_runs():
    raise NotEvaluable("no stored runs")
