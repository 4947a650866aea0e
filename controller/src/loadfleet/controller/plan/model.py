"""A plan as values: its targets, requests, sessions, agents, outputs and Gatling options,
frozen (parse.py makes one from YAML text and checks it), and the thresholds that decide its
verdict (thresholds.py).
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from loadfleet.controller.model.driver import DEFAULT_DRIVER, Driver
from loadfleet.controller.model.load import IDLE_LOAD, Load
from loadfleet.controller.plan import yamlsafe
from loadfleet.controller.plan.course import SWEEP_LEVEL
from loadfleet.controller.plan.feeds import Feed
from loadfleet.controller.plan.journeys import Cookies
from loadfleet.controller.plan.scenarios import DEFAULT_SCENARIO, Scenario
from loadfleet.controller.plan.stops import StopConditions
from loadfleet.controller.plan.sweep import Sweep
from loadfleet.controller.plan.thresholds import Threshold, VerdictRules, threshold_doc, verdict_doc
from loadfleet.controller.plan.workload import Request as Request  # re-exported: moved to workload.py
from loadfleet.controller.plan.workload import Session as Session
from loadfleet.controller.plan.workload import SessionStep as SessionStep
from loadfleet.controller.plan.workload import Target as Target
from loadfleet.controller.plan.workload import request_doc, session_doc
from loadfleet.wire import DEFAULT_INTERVAL_MS

DEFAULT_CONNECT_TIMEOUT_MS = 3000


DEFAULT_REQUEST_TIMEOUT_MS = 10000


DEFAULT_AGENT_WAIT_S = 30.0


class LossPolicy(enum.StrEnum):
    """What becomes of a share of a step's load lost in the middle of it (losses.py)."""

    REDISTRIBUTE = "redistribute"  # split over the step's live engines
    CONTINUE = "continue"  # the step goes on without it
    ABORT = "abort"  # the run ends, exit code 1


@dataclass(frozen=True)
class AgentSelection:
    count: int | None = None
    labels: tuple[tuple[str, str], ...] = ()
    wait_s: float = DEFAULT_AGENT_WAIT_S
    # While a job runs, agents keep producing load this long without word from the
    # controller (0: the controller's own lease, 3 s).
    lease_s: float = 0.0
    on_loss: LossPolicy = LossPolicy.REDISTRIBUTE

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.labels)


@dataclass(frozen=True)
class InfluxTarget:
    """Where the plan wants its points; the token is read on the controller from token_env."""

    url: str
    bucket: str = "loadfleet/autogen"
    org: str = "-"
    token_env: str = ""


@dataclass(frozen=True)
class GatlingOptions:
    """The gatling driver's options: a user's Maven project and simulation class (else the
    plan's workload runs on loadfleet's JobSimulation), and whether to collect Gatling's report."""

    project: str = ""
    simulation: str = ""
    html_report: bool = False


@dataclass(frozen=True)
class Plan:
    name: str
    duration_s: float
    targets: tuple[Target, ...]
    requests: tuple[Request, ...]
    load: Load
    keep_alive: bool = True
    session: Session | None = None
    # https targets: check certificates (off: lab and internal certificates are the norm).
    tls_verify: bool = False
    # Stop after exactly this many requests across the fleet (0: no budget).
    max_requests: int = 0
    interval_ms: int = DEFAULT_INTERVAL_MS
    connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    agents: AgentSelection = field(default_factory=AgentSelection)
    influxdb: InfluxTarget | None = None
    # Steps of load (with a sweep, duration_s is the sum of its steps' step_s).
    sweep: Sweep | None = None
    # Without a sweep: the first seconds of load, left out of the step's figures (a sweep has
    # its own per step, sweep.warmup_s).
    warmup_s: float = 0.0
    stop: StopConditions | None = None
    driver: Driver = DEFAULT_DRIVER
    gatling: GatlingOptions | None = None
    thresholds: tuple[Threshold, ...] = ()
    verdict: VerdictRules = VerdictRules()
    cookies: Cookies = Cookies()
    # The data file's rows (`workload.feed`), carried inline to the controller.
    feed: Feed | None = None
    # The declared scenarios (plan/scenarios.py); empty for a plain plan, whose one scenario
    # is the plan-level workload and load (each_scenario). With scenarios, the plan-level
    # requests, load, session and budget are empty and idle.
    scenarios: tuple[Scenario, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "driver", Driver(self.driver))  # "gatling" reads as Driver.GATLING
        if self.scenarios:
            plain = (self.requests, self.load, self.session, self.max_requests)
            assert plain == ((), IDLE_LOAD, None, 0), "a plan with scenarios has no plan-level load or workload"

    def each_scenario(self) -> tuple[Scenario, ...]:
        """The declared scenarios, or the one implicit `default` of a plain plan."""
        if self.scenarios:
            return self.scenarios
        implicit = Scenario(
            name=DEFAULT_SCENARIO,
            requests=self.requests,
            load=self.load,
            session=self.session,
            keep_alive=self.keep_alive,
            tls_verify=self.tls_verify,
            cookies=self.cookies,
            max_requests=self.max_requests,
            implicit=True,
        )
        return (implicit,)

    def describe_load(self) -> str:
        """The load in words: the plan's, or each scenario's by name."""
        if not self.scenarios:
            return self.load.describe()
        return "; ".join(f"{s.name}: {s.load.describe()}" for s in self.scenarios)

    def rows_per_report(self) -> int:
        """The (target, request) rows an agent's report can hold, over every scenario."""
        return sum(len(s.targets_of(self.targets)) * len({r.name for r in s.requests}) for s in self.each_scenario())

    def to_yaml(self) -> str:
        """The resolved plan as YAML that `parse_plan` reads back to an equal Plan."""
        doc: dict[str, Any] = {
            "name": self.name,
            "duration_s": self.duration_s,
            "interval_ms": self.interval_ms,
            "targets": [t.to_doc() for t in self.targets],
            "workload": self._workload_doc(),
            "load": self.load.to_doc(),
            "timeouts": {"connect_ms": self.connect_timeout_ms, "request_ms": self.request_timeout_ms},
            "agents": _agents_doc(self.agents),
        }
        if self.max_requests:
            doc["budget"] = {"requests": self.max_requests}
        if self.scenarios:  # each holds its own workload, load and budget
            del doc["workload"], doc["load"]
            doc["scenarios"] = [s.to_doc() for s in self.scenarios]
        if self.influxdb:
            doc["sinks"] = {"influxdb": {k: v for k, v in asdict(self.influxdb).items() if v}}
        if self.sweep:
            del doc["duration_s"]
            self._leave_level_out(doc)
            doc["sweep"] = self.sweep.to_doc()
        if self.stop:
            doc["stop"] = self.stop.to_doc()
        if self.warmup_s:
            doc["warmup_s"] = self.warmup_s
        if self.driver != DEFAULT_DRIVER:
            doc["driver"] = self.driver.value
        if self.gatling:
            doc["gatling"] = {k: v for k, v in asdict(self.gatling).items() if v}
            if self.gatling.project:  # the simulation is the workload
                doc.pop("workload", None)
        return yamlsafe.dump(doc | self._verdict_doc())

    def _leave_level_out(self, doc: dict[str, Any]) -> None:
        """A sweep's steps set the level: of the plan's load, or of the swept scenario's."""
        assert self.sweep is not None
        doc.get("load", {}).pop(SWEEP_LEVEL[self.load.model], None)
        swept = self.sweep.scenario or (self.scenarios[0].name if self.scenarios else "")
        for scenario in doc.get("scenarios", []):
            if scenario["name"] == swept:
                scenario["load"].pop(SWEEP_LEVEL[scenario["load"]["model"]], None)

    def _workload_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "keep_alive": self.keep_alive,
            "tls_verify": self.tls_verify,
            "requests": [request_doc(r) for r in self.requests],
        }
        if self.session:
            doc["session"] = session_doc(self.session)
        if self.cookies != Cookies():
            doc["cookies"] = self.cookies.to_doc()
        if self.feed:
            doc["feed"] = self.feed.to_doc()
        return doc

    def _verdict_doc(self) -> dict[str, Any]:
        """The thresholds and verdict rules, in the plan's words."""
        doc: dict[str, Any] = {}
        if self.thresholds:
            doc["thresholds"] = [threshold_doc(t) for t in self.thresholds]
        if self.verdict != VerdictRules():
            doc["verdict"] = verdict_doc(self.verdict)
        return doc


def _agents_doc(a: AgentSelection) -> dict[str, Any]:
    doc: dict[str, Any] = {"wait_s": a.wait_s}
    if a.count is not None:
        doc["count"] = a.count
    if a.labels:
        doc["labels"] = dict(a.labels)
    if a.lease_s:
        doc["lease_s"] = a.lease_s
    if a.on_loss is not LossPolicy.REDISTRIBUTE:
        doc["on_loss"] = a.on_loss.value
    return doc
