"""A plan's thresholds: limits on the run's figures that decide its verdict (exit code 4 when one
fails), and the rules of the verdict itself.

These are the values; below them, `threshold_problems` checks a plan's `thresholds` and
`threshold_from_doc` reads one (the CLI's `--threshold` shorthand becomes the same plan entry,
shorthand.py); `analysis/thresholds.py` evaluates them over the run's published intervals.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace
from typing import Any

from loadfleet.controller.model.errors import Problem


class Metric(enum.StrEnum):
    """What a threshold limits. Time metrics are in ms and take a `Stat`; the others do not."""

    LATENCY = "latency"  # a response's latency, from its due time to its last byte
    WAITING = "waiting"  # the phases (docs/metrics.md)
    QUEUEING = "queueing"  # waiting for a free worker or HTTP/2 stream before going out
    CONNECT = "connect"
    TLS = "tls"
    RECEIVING = "receiving"
    ERROR_PCT = "error_pct"  # failed requests (transport errors and failed checks) per request, in %
    RPS = "rps"  # requests attempted per second
    OK_RPS = "ok_rps"  # requests answered ok per second
    REQUESTS = "requests"  # requests attempted
    OK = "ok"  # requests answered ok
    CHECK_PASS_PCT = "check_pass_pct"  # one named check's pass rate, in %

    @property
    def is_time(self) -> bool:
        return self in _TIME_METRICS


_TIME_METRICS = frozenset(
    {Metric.LATENCY, Metric.WAITING, Metric.QUEUEING, Metric.CONNECT, Metric.TLS, Metric.RECEIVING}
)


class StatKind(enum.StrEnum):
    MIN = "min"
    MEAN = "mean"
    STDDEV = "stddev"
    MAX = "max"
    PERCENTILE = "percentile"


@dataclass(frozen=True)
class Stat:
    """Which statistic of a time metric: `p99` is Stat(PERCENTILE, 99.0), `mean` Stat(MEAN)."""

    kind: StatKind
    percentile: float = 0.0

    @property
    def label(self) -> str:
        return f"p{self.percentile:g}" if self.kind is StatKind.PERCENTILE else self.kind.value


class OverKind(enum.StrEnum):
    RUN = "run"  # every measured interval of the run, merged
    STEP = "step"  # each step's measured intervals, merged; fails if any step fails
    WINDOW = "window"  # every rolling window of `window_s` seconds


@dataclass(frozen=True)
class Over:
    kind: OverKind = OverKind.RUN
    window_s: float = 0.0

    @property
    def label(self) -> str:
        return f"window {self.window_s:g} s" if self.kind is OverKind.WINDOW else self.kind.value


class NoData(enum.StrEnum):
    """What a threshold's verdict is when its scope measured nothing to judge (no response for a
    time metric, no request for a rate): the latency of nothing is not 0."""

    FAIL = "fail"
    PASS = "pass"


@dataclass(frozen=True)
class Abort:
    """End the run early once the threshold fails, but not before `grace_s` seconds of load."""

    grace_s: float = 0.0


@dataclass(frozen=True)
class Threshold:
    """One limit: `metric` (with `stat` for a time metric) of the scope's merged figures over
    `over` must stay below `limit` (`below`) or above it. The scope is the cluster, or at most
    one of `target` and `request` by name, either within one `scenario` (plan `scenarios:`)
    or over all of them; `check` names the check of CHECK_PASS_PCT."""

    name: str  # as written, or the text of the limit when unnamed ("p99 latency < 250 ms")
    metric: Metric
    limit: float
    below: bool
    stat: Stat | None = None  # time metrics only
    target: str = ""
    request: str = ""
    check: str = ""
    over: Over = Over()
    abort: Abort | None = None
    on_no_data: NoData = NoData.FAIL
    scenario: str = ""  # "": every scenario (the whole run)

    @property
    def scope(self) -> str:
        """`cluster`, `target app`, `request account`, `scenario checkout` or `scenario
        checkout, request pay`."""
        within = f"target {self.target}" if self.target else f"request {self.request}" if self.request else ""
        if self.scenario:
            return f"scenario {self.scenario}" + (f", {within}" if within else "")
        return within or "cluster"

    @property
    def unit(self) -> str:
        if self.metric.is_time:
            return "ms"
        if self.metric in (Metric.ERROR_PCT, Metric.CHECK_PASS_PCT):
            return "%"
        if self.metric in (Metric.RPS, Metric.OK_RPS):
            return "/s"
        return ""

    @property
    def text(self) -> str:
        """The limit in words: `p99 latency < 250 ms`, `error_pct < 1 %`."""
        what = f"{self.stat.label} {self.metric.value}" if self.stat else self.metric.value
        if self.check:
            what += f" of check {self.check!r}"
        return f"{what} {'<' if self.below else '>'} {self.limit:g}{' ' + self.unit if self.unit else ''}"


@dataclass(frozen=True)
class VerdictRules:
    """How the thresholds' results make the run's verdict."""

    # The implicit threshold "some response was ok": a run in which every request failed fails.
    require_success: bool = True
    # A threshold that could not be judged (too many of its intervals invalid) fails the verdict.
    inconclusive_fails: bool = True


# ------------------------------------------------------------------ reading them from a plan

# At most this many thresholds in a plan: the evaluation keeps O(thresholds × window) rows.
MAX_THRESHOLDS = 50
# A window holds at most this many intervals: the evaluation keeps a ring of per-interval rows
# per windowed threshold (analysis/thresholds.py), bounded by this.
MAX_WINDOW_INTERVALS = 600

# Which stats each time metric has: latency keeps a histogram, waiting too (its phase's
# histogram); queueing, connect, tls and receiving keep only sums and maxima.
_STAT_KINDS = {
    Metric.LATENCY: (StatKind.MIN, StatKind.MEAN, StatKind.STDDEV, StatKind.MAX, StatKind.PERCENTILE),
    Metric.WAITING: (StatKind.MEAN, StatKind.MAX, StatKind.PERCENTILE),
    Metric.QUEUEING: (StatKind.MEAN, StatKind.MAX),
    Metric.CONNECT: (StatKind.MEAN, StatKind.MAX),
    Metric.TLS: (StatKind.MEAN, StatKind.MAX),
    Metric.RECEIVING: (StatKind.MEAN, StatKind.MAX),
}
# pN with 0 < N ≤ 100 and at most 4 decimals: then `Stat.label` (6 significant digits) writes
# it back exactly, so a plan's to_yaml round trip keeps it.
_PERCENTILE = re.compile(r"p(100|[0-9]{1,2}(\.[0-9]{1,4})?)")
_LIMIT_KEYS = ("below", "above", "below_ms", "above_ms")
_PERCENT_METRICS = (Metric.ERROR_PCT, Metric.CHECK_PASS_PCT)


@dataclass(frozen=True)
class PlanFacts:
    """What of a plan its thresholds are checked against."""

    targets: frozenset[str]  # the names of its named targets
    requests: frozenset[str]
    checks: frozenset[str]  # its requests' checks, and their extractions as "extract <var>"
    interval_s: float
    swept: bool
    # A Gatling project's requests are its simulation's, unknown before the run: a request
    # name is not checked then (a misspelled one measures nothing and fails by `on_no_data`).
    requests_known: bool = True


def parse_stat(text: str) -> Stat | None:
    """`p99.9` -> Stat(PERCENTILE, 99.9), `mean` -> Stat(MEAN); None if it is no stat."""
    if text in (k.value for k in StatKind if k is not StatKind.PERCENTILE):
        return Stat(StatKind(text))
    if _PERCENTILE.fullmatch(text) and float(text[1:]) > 0:
        return Stat(StatKind.PERCENTILE, float(text[1:]))
    return None


def allowed_stats(metric: Metric) -> str:
    """The stats of a time metric in words: `mean or max`."""
    percentile = "pN (0 < N ≤ 100, e.g. p99, p99.9)"
    words = [percentile if k is StatKind.PERCENTILE else k.value for k in _STAT_KINDS[metric]]
    return ", ".join(words[:-1]) + " or " + words[-1]


def threshold_problems(docs: list[dict[str, Any]], facts: PlanFacts) -> list[Problem]:
    """Every problem of a plan's `thresholds` (already of the schema's shape), with its path."""
    problems: list[Problem] = []
    named: dict[str, int] = {}
    for i, doc in enumerate(docs):
        path = f"thresholds[{i}]"
        own = [*_stat_problems(doc, path), *_limit_problems(doc, path), *_scope_problems(doc, path, facts)]
        own += _over_problems(doc, path, facts)
        problems += own
        if own:
            continue
        name = threshold_from_doc(doc).name
        if name in named:  # k6 keeps the last of two; a verdict must not depend on which
            where = f"{path}.name" if "name" in doc else path
            problems.append(Problem(where, f"{name!r} names thresholds[{named[name]}] too: give one a `name`"))
        named.setdefault(name, i)
    return problems


def _stat_problems(doc: dict[str, Any], path: str) -> list[Problem]:
    metric = Metric(doc["metric"])
    if not metric.is_time:
        if "stat" in doc:
            return [Problem(f"{path}.stat", f"{metric} takes no stat (only latency, waiting, connect, tls, receiving)")]
        return []
    if "stat" not in doc:
        return [Problem(f"{path}.stat", f"{metric} needs a stat: {allowed_stats(metric)}")]
    stat = parse_stat(doc["stat"])
    if stat is None or stat.kind not in _STAT_KINDS[metric]:
        no_histogram = StatKind.PERCENTILE not in _STAT_KINDS[metric]
        why = " (its phase keeps sums and maxima, no histogram)" if no_histogram else ""
        return [Problem(f"{path}.stat", f"{doc['stat']!r} is no stat of {metric}: {allowed_stats(metric)}{why}")]
    return []


def _limit_problems(doc: dict[str, Any], path: str) -> list[Problem]:
    metric = Metric(doc["metric"])
    unit = "_ms" if metric.is_time else ""
    problems = []
    for key in _LIMIT_KEYS:
        if key in doc and key.endswith("_ms") != metric.is_time:
            hint = f"{metric} is in ms: use {key}_ms" if metric.is_time else f"{metric} is no time: use {key[:-3]}"
            problems.append(Problem(f"{path}.{key}", hint))
    given = [k for k in _LIMIT_KEYS if k in doc]
    if len(given) > 1:
        problems.append(Problem(path, f"give one limit, below{unit} or above{unit}, not {' and '.join(given)}"))
    elif not given:
        problems.append(Problem(path, f"give a limit: below{unit} or above{unit}"))
    elif not problems:
        problems += _limit_value_problems(metric, given[0], doc[given[0]], f"{path}.{given[0]}")
    return problems


def _limit_value_problems(metric: Metric, key: str, limit: float, path: str) -> list[Problem]:
    """A limit no figure can pass, or one every figure passes (a percentage above 100)."""
    if key.startswith("below") and limit <= 0:
        return [Problem(path, f"nothing is below {limit:g}: this threshold could never pass")]
    if metric in _PERCENT_METRICS and limit > 100:
        return [Problem(path, f"{limit:g} %: a percentage is at most 100")]
    if metric in _PERCENT_METRICS and key == "above" and limit >= 100:
        return [Problem(path, "nothing is above 100 %: this threshold could never pass")]
    return []


def _scope_problems(doc: dict[str, Any], path: str, facts: PlanFacts) -> list[Problem]:
    problems = []
    if "target" in doc and "request" in doc:
        problems.append(Problem(path, "give target or request, not both (without either: the cluster)"))
    if "target" in doc and doc["target"] not in facts.targets:
        known = _names(facts.targets) if facts.targets else "none: give targets a `name`"
        problems.append(Problem(f"{path}.target", f"no target is named {doc['target']!r} (the plan's: {known})"))
    if "request" in doc and facts.requests_known and doc["request"] not in facts.requests:
        known = _names(facts.requests) or "none"
        problems.append(Problem(f"{path}.request", f"no request is named {doc['request']!r} (the plan's: {known})"))
    return problems + _check_problems(doc, path, facts)


def _check_problems(doc: dict[str, Any], path: str, facts: PlanFacts) -> list[Problem]:
    metric = Metric(doc["metric"])
    if metric is not Metric.CHECK_PASS_PCT:
        return [Problem(f"{path}.check", f"only check_pass_pct takes a check, not {metric}")] if "check" in doc else []
    if "check" not in doc:
        what = "the name of a check a request declares, or 'extract VAR'"
        return [Problem(f"{path}.check", f"check_pass_pct needs `check`: {what}")]
    if doc["check"] in facts.checks:
        return []
    known = f"the plan's: {_names(facts.checks)}" if facts.checks else "the plan's requests declare no checks"
    return [Problem(f"{path}.check", f"no check is named {doc['check']!r} ({known})")]


def _over_problems(doc: dict[str, Any], path: str, facts: PlanFacts) -> list[Problem]:
    """`over` and `abort`: when, and over what, the threshold is judged."""
    abort = doc.get("abort")
    if isinstance(abort, dict) and abort.get("grace_s", 0) < 0:
        return [Problem(f"{path}.abort.grace_s", f"a grace of {abort['grace_s']:g} s: give 0 s or more")]
    over = doc.get("over")
    if over is None:
        if not facts.swept:
            return []
        why = "step (each level judged alone; --threshold …@step) or run (the merged run mixes levels; …@run)"
        return [Problem(f"{path}.over", f"a plan with a sweep says `over` for each threshold: {why}")]
    if not isinstance(over, dict):
        return []
    window_s, interval_s = over["window_s"], facts.interval_s
    if window_s < interval_s:
        shorter = f"{window_s:g} s is shorter than the plan's interval of {interval_s:g} s"
        return [Problem(f"{path}.over.window_s", shorter)]
    if window_s > MAX_WINDOW_INTERVALS * interval_s:
        bound = f"{MAX_WINDOW_INTERVALS} intervals ({MAX_WINDOW_INTERVALS * interval_s:g} s at {interval_s:g} s)"
        return [Problem(f"{path}.over.window_s", f"{window_s:g} s is above {bound}: a window keeps at most that many")]
    return []


# A plan may have 10,000 requests: its names are listed up to this many.
_MAX_LISTED = 10


def _names(names: frozenset[str]) -> str:
    ordered = sorted(names)
    more = f", … ({len(ordered) - _MAX_LISTED} more)" if len(ordered) > _MAX_LISTED else ""
    return ", ".join(ordered[:_MAX_LISTED]) + more


def threshold_from_doc(doc: dict[str, Any]) -> Threshold:
    """One checked `thresholds` entry as a value; unnamed, its name is its limit in words."""
    key = next(k for k in _LIMIT_KEYS if k in doc)
    threshold = Threshold(
        name="",
        metric=Metric(doc["metric"]),
        limit=float(doc[key]),
        below=key.startswith("below"),
        stat=parse_stat(doc["stat"]) if "stat" in doc else None,
        target=doc.get("target", ""),
        request=doc.get("request", ""),
        check=doc.get("check", ""),
        over=_over(doc.get("over", OverKind.RUN.value)),
        abort=_abort(doc.get("abort", False)),
        on_no_data=NoData(doc.get("on_no_data", NoData.FAIL)),
        scenario=doc.get("scenario", ""),
    )
    return replace(threshold, name=doc.get("name") or threshold.text)


def _over(doc: str | dict[str, Any]) -> Over:
    if isinstance(doc, dict):
        return Over(OverKind.WINDOW, float(doc["window_s"]))
    return Over(OverKind(doc))


def _abort(doc: bool | dict[str, Any]) -> Abort | None:
    if isinstance(doc, dict):
        return Abort(float(doc.get("grace_s", 0)))
    return Abort() if doc else None


def threshold_doc(t: Threshold) -> dict[str, Any]:
    """A threshold as its plan entry, which `threshold_from_doc` reads back to an equal value."""
    doc: dict[str, Any] = {"metric": t.metric.value}
    if t.name != t.text:
        doc["name"] = t.name
    if t.stat:
        doc["stat"] = t.stat.label
    doc[("below" if t.below else "above") + ("_ms" if t.metric.is_time else "")] = t.limit
    scope = (("scenario", t.scenario), ("target", t.target), ("request", t.request), ("check", t.check))
    doc.update({k: v for k, v in scope if v})
    # Always said: a sweep's plan must say it, and the resolved plan is checked again.
    doc["over"] = {"window_s": t.over.window_s} if t.over.kind is OverKind.WINDOW else t.over.kind.value
    if t.abort:
        doc["abort"] = {"grace_s": t.abort.grace_s}
    if t.on_no_data is not NoData.FAIL:
        doc["on_no_data"] = t.on_no_data.value
    return doc


def verdict_from_doc(doc: dict[str, Any] | None) -> VerdictRules:
    doc = doc or {}
    return VerdictRules(
        require_success=doc.get("require_success", True), inconclusive_fails=doc.get("inconclusive", "fail") == "fail"
    )


def verdict_doc(rules: VerdictRules) -> dict[str, Any]:
    return {"require_success": rules.require_success, "inconclusive": "fail" if rules.inconclusive_fails else "pass"}
