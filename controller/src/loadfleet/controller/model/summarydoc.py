"""summary.json read back: the one typed reader of a run's summary (what analysis/summary.py's
`RunSummary.to_json` writes) for the console, the reports and the comparison.

`SummaryDoc.of(doc)` reads the parsed JSON document. It is as tolerant as the readers before
it: a key an older summary lacks reads as its field's default (a key present with null, for a
list, as empty), and values keep their JSON types (an integer stays an integer), so what is
printed from them does not change. A text whose readers fell back on different words when it
is missing (`state`, `plan_name`, an event's `kind` or `at_ms`) reads as None, and each reader
says its own. Fields are only those something reads; rundata.py's `summary_problem` has
checked that the figures are numbers before anything is read.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from loadfleet.controller.model.codec import from_doc
from loadfleet.controller.model.figures import CheckFigures
from loadfleet.controller.model.hostsamples import Bottleneck
from loadfleet.controller.model.selfsample import ControllerLoad
from loadfleet.controller.model.thresholdresult import RunVerdict, ThresholdResult

T = TypeVar("T")


@dataclass(frozen=True)
class Latency:
    mean_ms: float = 0
    stddev_ms: float = 0
    p50_ms: float = 0
    p90_ms: float = 0
    p99_ms: float = 0
    max_ms: float = 0


@dataclass(frozen=True)
class PhaseTime:
    """One phase of the responses (figures.PhaseTime)."""

    count: int = 0
    mean_ms: float = 0
    per_response_ms: float = 0


@dataclass(frozen=True)
class Phases:
    """Where the responses' time went (figures.PhaseFigures); None where no driver measured it."""

    responses: int = 0
    connect: PhaseTime = PhaseTime()
    tls: PhaseTime = PhaseTime()
    waiting: PhaseTime = PhaseTime()
    receiving: PhaseTime = PhaseTime()
    other_ms: float = 0
    waiting_p50_ms: float = 0
    waiting_p99_ms: float = 0
    queueing: PhaseTime = PhaseTime()  # absent from a summary of before it: 0

    def phase(self, name: str) -> PhaseTime:
        """queueing, connect, tls, waiting or receiving (wire.phases.PHASE_NAMES)."""
        time: PhaseTime = getattr(self, name)
        return time


@dataclass(frozen=True)
class EntryFigures:
    requests: int = 0
    rps: float = 0  # attempts per second
    ok_rps: float | None = None  # successes per second; None in a summary of before it was written
    mb_per_s: float = 0
    error_pct: float = 0
    latency: Latency | None = Latency()  # None (null): no response carried a latency
    latency_missing: bool = False  # a Gatling simulation without loadfleet's hook: counts only
    phases: Phases | None = None
    # Responses that failed a check (in error_pct, not in ok_rps), every declared check's
    # pass % together (None: the plan declares none, or a summary of before checks), and the
    # users and sessions the plan's rules stopped and restarted.
    check_failed: int = 0
    check_pass_pct: float | None = None
    users_stopped: int = 0
    sessions_restarted: int = 0
    redirects: int = 0  # redirect hops followed (plan `redirects`)


@dataclass(frozen=True)
class Entry:
    """The run's total, or one target's, request's or agent's (summary.NamedFigures)."""

    name: str = "?"
    figures: EntryFigures = EntryFigures()
    errors: dict[str, int] = field(default_factory=dict)  # transport errors by kind, and `check`
    status: dict[str, int] = field(default_factory=dict)  # responses by class, "2xx"...
    # Per declared check and extraction ("extract <var>"), in the plan's order; the total's,
    # a target's and an agent's merge the same name of their requests.
    checks: dict[str, CheckFigures] = field(default_factory=dict)


@dataclass(frozen=True)
class StepHost:
    host: str = ""
    cpu_pct: float = 0


@dataclass(frozen=True)
class StepTarget:
    url: str = ""
    achieved_rps: float = 0
    ok_rps: float = 0
    error_pct: float = 0
    # None: no response to it carried a latency (the latency of nothing is not 0).
    mean_ms: float | None = 0
    p50_ms: float | None = 0
    p99_ms: float | None = 0


# The sentence analysis/genbound.py's `describe` puts between a generator-bound step's own
# finding and its advice (what to change), which is the same for every such step of a run.
GENERATOR_LIMIT = "its throughput is what the generators could send, not what the targets can take."


@dataclass(frozen=True)
class Step:
    """One step of the run (stepresult.StepResult); `offered` None in a summary without it."""

    name: str = ""
    state: str = "finished"
    servers: int = 0
    offered: float | None = None
    requests: int = 0
    achieved_rps: float = 0
    ok_rps: float = 0
    bytes_per_s: float = 0
    error_pct: float = 0
    # None: no response of the step carried a latency (the latency of nothing is not 0).
    mean_ms: float | None = 0
    stddev_ms: float | None = 0
    p50_ms: float | None = 0
    p99_ms: float | None = 0
    concurrent_conns: float = 0
    peak_users: int = 0  # a summary of before users were counted has none
    generator_bound: bool = False
    generator_advice: str = ""
    validity: str = "valid"
    validity_reasons: str = ""
    losses: int = 0
    hosts: tuple[StepHost, ...] = ()
    # The saturated resource the monitors saw (analysis/bottleneck.py); None: none, or no monitor.
    bottleneck: Bottleneck | None = None
    targets: tuple[StepTarget, ...] = ()
    phases: Phases | None = None

    def finding_and_advice(self) -> tuple[str, str]:
        """`generator_advice` in two: what was found in this step, and the advice that follows
        it for a generator-bound step ("" otherwise, and in a summary of other words)."""
        finding, found, advice = self.generator_advice.partition("; " + GENERATOR_LIMIT)
        return (finding, advice.strip()) if found else (self.generator_advice, "")

    @staticmethod
    def advice_lines(steps: Iterable[Step]) -> list[str]:
        """What to know about the steps that were not valid, each piece of advice said once:
        "generator-bound steps s1, s3: <advice>" followed by each step's own finding, then
        the findings of the steps without advice (suspect, a target's failure)."""
        grouped: dict[str, list[Step]] = {}  # advice → its steps, in step order
        alone = []
        for st in steps:
            if not (st.generator_bound or st.validity != "valid") or not st.generator_advice:
                continue
            advice = st.finding_and_advice()[1]
            if advice:
                grouped.setdefault(advice, []).append(st)
            else:
                alone.append(st.generator_advice)
        lines = []
        for advice, group in grouped.items():
            # That their figures are the generator's limit the analysis' notes say once; here, what to do.
            names = ", ".join(st.name for st in group)
            lines.append(f"generator-bound step{'s' * (len(group) > 1)} {names}: {advice}")
            lines += ["  " + st.finding_and_advice()[0] for st in group]
        return lines + alone


@dataclass(frozen=True)
class Spread:
    mean: float = 0
    stddev: float = 0


@dataclass(frozen=True)
class Level:
    """A sweep's level over its repetitions (steps.LevelSummary)."""

    name: str = ""
    repetitions: int = 0
    achieved_rps: Spread = Spread()
    p99_ms: Spread = Spread()


@dataclass(frozen=True)
class Stop:
    text: str = ""


@dataclass(frozen=True)
class Host:
    """A monitored host over the run's load (hostsamples.HostLoad)."""

    host: str = ""
    role: str = ""
    targets: tuple[str, ...] = ()
    cpu_pct: float = 0
    max_cpu_pct: float = 0
    process_cpu_pct: float = 0
    mem_used_pct: float = 0
    net_rx_mb_per_s: float = 0
    net_tx_mb_per_s: float = 0
    tcp_established: float = 0
    counter_rates: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class EventDoc:
    kind: str | None = None
    at_ms: int | None = None
    agent_id: str = ""
    text: str = ""


@dataclass(frozen=True)
class ScenarioDoc:
    """One scenario of a plan with `scenarios:` (summary.ScenarioSummary)."""

    name: str = "?"
    model: str = ""
    load: str = ""
    start_after_s: float = 0.0
    duration_s: float | None = None
    budget: int = 0
    total: Entry = Entry()
    requests: tuple[Entry, ...] = ()


@dataclass(frozen=True)
class SummaryDoc:
    """summary.json as its readers see it."""

    run_id: str | None = None
    plan_name: str | None = None
    state: str | None = None
    message: str = ""
    started_ms: int = 0
    duration_s: float = 0.0
    total: Entry = Entry()
    targets: tuple[Entry, ...] = ()
    requests: tuple[Entry, ...] = ()
    agents: tuple[Entry, ...] = ()
    events: tuple[EventDoc, ...] = ()
    steps: tuple[Step, ...] = ()
    levels: tuple[Level, ...] = ()
    analysis_notes: tuple[str, ...] = ()
    stop: Stop | None = None
    hosts: tuple[Host, ...] = ()
    incomplete_files: tuple[str, ...] = ()  # left incomplete by a full disk (rundisk.py)
    late_requests: dict[str, int] = field(default_factory=dict)
    # Read as the controller's own type; the losses stay documents (fleet's Loss reads them).
    controller: ControllerLoad | None = None
    losses: tuple[dict[str, Any], ...] = ()
    # The thresholds' results and the run's verdict; None in a summary written before verdicts.
    thresholds: tuple[ThresholdResult, ...] = ()
    verdict: RunVerdict | None = None
    # A unique feed's rows by their state in ledger.csv; empty without one.
    feed_rows: dict[str, int] = field(default_factory=dict)
    scenarios: tuple[ScenarioDoc, ...] = ()  # a plan with `scenarios:`; empty for a plain plan

    @classmethod
    def of(cls, doc: dict[str, Any]) -> SummaryDoc:
        return _read(cls, doc)


def _read(cls: type[T], doc: dict[str, Any]) -> T:
    """`doc` as the dataclass `cls`: each field present read by its type hint, the others
    left to their defaults."""
    hints = _hints(cls)  # type: ignore[arg-type]  # a class is hashable
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]  # one of the dataclasses above
    return cls(**{name: _value(hints[name], doc[name]) for name in names if name in doc})


def _value(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = next(a for a in typing.get_args(hint) if a is not type(None))
        return None if value is None else _value(inner, value)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return tuple(_value(item, v) for v in value or ())
    if origin is dict:
        item = typing.get_args(hint)[1]
        return {k: _value(item, v) for k, v in (value or {}).items()}
    if hint in _OWN_TYPES:
        return from_doc(hint, value) if value else None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _read(hint, value)
    return value  # as JSON has it: numbers keep their type


# Read as the controller's own types (with their enums), not as the readers' shapes above.
_OWN_TYPES = (ControllerLoad, ThresholdResult, RunVerdict, Bottleneck)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)
