"""Every InfluxQL example of docs/metrics.md runs against a real InfluxDB 1.8 filled with
points made by the controller's own point builders, and returns rows."""

from __future__ import annotations

import re
import time
from dataclasses import replace

import pytest

from loadfleet.controller.analysis.drift import Drift
from loadfleet.controller.analysis.genbound import GeneratorHealth
from loadfleet.controller.analysis.selfwatch import ControllerRecorder
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.figures import figures_of
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import HostLoad, HostSample, MonitorInfo, ProcessSample
from loadfleet.controller.model.selfsample import ControllerSample
from loadfleet.controller.model.stepresult import ScenarioStepResult
from loadfleet.controller.model.thresholdresult import Outcome, ThresholdResult
from loadfleet.controller.model.verdict import Validity
from loadfleet.controller.output.sinks.checkpoints import check_points
from loadfleet.controller.output.sinks.feedpoints import feed_points
from loadfleet.controller.output.sinks.influx import InfluxConfig, influx_writer
from loadfleet.controller.output.sinks.output import InfluxOutput
from loadfleet.controller.output.sinks.points import (
    agent_point,
    controller_point,
    drift_point,
    event_point,
    host_points,
    http_points,
)
from loadfleet.controller.output.sinks.steppoints import (
    scenario_step_points,
    step_host_points,
    step_point,
    step_target_points,
)
from loadfleet.controller.output.sinks.thresholdpoints import threshold_points
from loadfleet.controller.stream.contract import Scope
from loadfleet.v1 import stats_pb2
from loadfleet.wire.checks import CheckCount
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.phases import Phase, Phases
from loadfleet.wire.stats import StatsRow, merge_rows
from support.procs import REPO
from support.streamdata import interval, window

pytestmark = pytest.mark.e2e

RUN_ID = "20300101-000000-docs"
DOC = REPO / "docs" / "metrics.md"


def doc_queries() -> list[str]:
    blocks = re.findall(r"```sql\n(.*?)```", DOC.read_text(), re.S)
    statements = []
    for block in blocks:  # one statement per line, or one spread over continuation lines
        current = ""
        for line in block.splitlines():
            if line.startswith(("SELECT", "SHOW")) and current:
                statements.append(current)
                current = ""
            current += (" " if current else "") + line.strip()
        statements.append(current)
    return [s.replace("$run", RUN_ID) for s in statements]


def _row(target: str, request: str, n: int) -> StatsRow:
    row = StatsRow(target, request, requests=n + 1, bytes_in=n * 500, bytes_out=n * 80, active_connections=2)
    row.active_streams = 3
    row.status[1] = n
    # A journey's request: one response in each interval failed its check (a 200 without the page's text).
    row.checks_reported, row.reported_check_failed = True, 1
    row.checks = {"status": CheckCount(n, 0), "welcome": CheckCount(n - 1, 1)}
    row.errors[stats_pb2.ERROR_KIND_CONNECT_REFUSED] = 1
    row.histogram = Histogram.of(1000 + 10 * i for i in range(n))
    row.phases = Phases(
        connect=Phase(2, 300, 200),
        tls=Phase(2, 900, 500),
        waiting=Phase(n, 700 * n, 900),
        receiving=Phase(n, 50 * n, 80),
        waiting_histogram=Histogram.of(700 + i for i in range(n)),
        queueing=Phase(n, 100 * n, 400),
    )
    return row


WEB_HOST = MonitorInfo(targets=("http://127.0.0.2:80",), processes=("nginx",))


LB_HOST = MonitorInfo(role="lb", processes=("haproxy",))
REQ_TOT = "haproxy.group.web1.req_tot"


def _host_sample(at_ms: int) -> HostSample:
    return HostSample(
        at_ms=at_ms,
        cores=2,
        cpu_pct=35.0,
        mem_used_pct=20.0,
        net_rx_bytes_per_s=1e6,
        net_tx_bytes_per_s=5e6,
        tcp_established=12,
        processes=(ProcessSample("nginx", 2, 60.0, 40.0),),
    )


def _lb_sample(at_ms: int, i: int) -> HostSample:
    return HostSample(
        at_ms=at_ms,
        cores=2,
        cpu_pct=10.0,
        mem_used_pct=20.0,
        net_rx_bytes_per_s=1e6,
        net_tx_bytes_per_s=1e6,
        tcp_established=4,
        counters={REQ_TOT: 500.0 * i},
    )


def _step_hosts() -> tuple[HostLoad, ...]:
    return (
        HostLoad(
            host="web1",
            role="",
            targets=WEB_HOST.targets,
            samples=3,
            cpu_pct=35.0,
            max_cpu_pct=40.0,
            process_cpu_pct=60.0,
            mem_used_pct=20.0,
            net_rx_mb_per_s=1.0,
            net_tx_mb_per_s=5.0,
            tcp_established=12.0,
        ),
        HostLoad(
            host="lb1",
            role="lb",
            targets=(),
            samples=3,
            cpu_pct=10.0,
            max_cpu_pct=12.0,
            process_cpu_pct=8.0,
            mem_used_pct=20.0,
            net_rx_mb_per_s=1.0,
            net_tx_mb_per_s=1.0,
            tcp_established=4.0,
            counter_rates={REQ_TOT: 500.0},
        ),
    )


def _in(scenario: str, row: StatsRow) -> StatsRow:
    """The row as a scenario's (the doc's data is a run of a plan with two scenarios)."""
    row.scenario = scenario
    return row


def fill(influx) -> None:
    now_ms = int(time.time() * 1000) // 1000 * 1000
    start_ms = now_ms - 30_000
    points = []
    output = InfluxOutput(RUN_ID, [Collect(points)])  # the run's own stream into points
    drift = Drift(interval_ms=1000, emit=output.on_drift)
    generators = GeneratorHealth(1000)
    controller = ControllerRecorder(emit=output.on_event)
    step = window("main", start_ms=start_ms, seconds=10)
    for i in range(10):
        at = start_ms + i * 1000
        published = interval(
            step,
            at,
            **{
                agent: [
                    _in("browse", _row("http://127.0.0.2:80", "home", 20 + i)),
                    _in("checkout", _row("http://127.0.0.3:80", "home", 10)),
                ]
                for agent in ("a1", "a2")
            },
        )
        for agent in ("a1", "a2"):
            health = Health(
                cpu_pct=96.0 if i == 3 else 40.0, engine_cpu_pct=80.0, busiest_engine_cpu_pct=97.0 if i == 3 else 40.0
            )
            output.on_health(step, agent, health, at + 1000, 1)
            generators.on_health(step, agent, health, at + 1000, 1)
        published = replace(published, verdict=generators.judge(published))
        output.on_interval(published)
        drift.on_interval(published)
        output.on_host(step, "web1", WEB_HOST, _host_sample(at + 900))
        output.on_host(step, "lb1", LB_HOST, _lb_sample(at + 900, i))
        sample = ControllerSample(at + 1000, loop_lag_ms=700.0 if i == 4 else 2.0, cpu_pct=30.0, rss_mb=90.0, agents=2)
        output.on_controller(sample)
        controller.on_controller(sample)  # its stall becomes a controller_stalled event
    total = merge_rows([_row("*", "*", 300)], target="*", request="*")[("", "*", "*")]
    points.append(
        step_point(
            run_id=RUN_ID,
            step="main",
            servers=2,
            offered=4.0,
            start_ms=start_ms,
            total=figures_of(total, 10),
            bytes_per_s=1e6,
            generator_bound=False,
            losses=1,
            validity=Validity.SUSPECT,
            invalid_intervals=1,
            suspect_intervals=0,
            validity_reasons="a1: engine at 97 % of its core",
        )
    )
    points += scenario_step_points(run_id=RUN_ID, step="main", servers=2, start_ms=start_ms, scenarios=[SCENARIO_STEP])
    points += step_host_points(
        run_id=RUN_ID, step="main", servers=2, offered=4.0, start_ms=start_ms, hosts=_step_hosts()
    )
    points += step_target_points(
        run_id=RUN_ID,
        step="main",
        servers=2,
        offered=4.0,
        start_ms=start_ms,
        targets=[_target_figures(url) for url in ("http://127.0.0.2:80", "http://127.0.0.3:80")],
    )
    points.append(event_point(run_id=RUN_ID, event=Event(EventKind.AGENT_LOST, "a2 lost", "a2", at_ms=start_ms + 5000)))
    points.append(event_point(run_id=RUN_ID, event=Event(EventKind.THRESHOLD_FAILING, P99.text, at_ms=start_ms + 6000)))
    started = Event(EventKind.SCENARIO_STARTED, "scenario browse started", at_ms=start_ms, scenario="browse")
    points.append(event_point(run_id=RUN_ID, event=started))
    output.on_thresholds((P99, NO_DATA), at_ms=now_ms)
    points += feed_points(run_id=RUN_ID, rows={"used": 28, "in_flight_at_loss": 2, "unused": 0}, at_ms=now_ms)
    influx_writer(InfluxConfig(url=influx.url))([p.line() for p in points])


# The thresholds' results at the run's end: one failed, one with nothing to judge (no value).
P99 = ThresholdResult("p99 latency < 1 ms", "p99 latency < 1 ms", "cluster", "run", 1.0, "ms", 1.3, Outcome.FAILED)
NO_DATA = ThresholdResult(
    "account p99", "p99 latency < 5 ms", "request account", "window 30 s", 5.0, "ms", None, Outcome.INCONCLUSIVE
)


class Collect:
    """A sink that keeps what it is given."""

    def __init__(self, points: list):
        self.points = points

    def add(self, points) -> None:
        self.points += points


def doc_schema() -> dict[str, tuple[set[str], set[str]]]:
    """measurement -> (tags, fields) as the tables of docs/metrics.md list them."""
    schema = {}
    for name, section in re.findall(r"^### `(\w+)`.*?\n(.*?)(?=^###|^## )", DOC.read_text(), re.S | re.M):
        tags, fields = set(), set()
        for first, second in re.findall(r"^\| (.+?) \| (.+?) \|", section, re.M):
            names = set(re.findall(r"`(\w+)`", first))
            if "…" in first:  # `status_1xx` … `status_5xx`
                names |= {f"status_{c}xx" for c in "12345"}
            (fields if second in ("integer", "float", "boolean", "string") else tags).update(names)
        schema[name] = (tags, fields)
    return schema


def all_points() -> dict:
    """Points of each measurement with every tag and field the code can write: a plan with
    scenarios' (`scenario` tags), and for `step` the whole step's point beside a scenario's."""
    row = _row("http://127.0.0.2:80", "home", 5)
    row.scheduled, row.sent_late, row.max_send_lag_us, row.not_sent = 6, 1, 2500, 1
    row.scenario = "browse"
    total = merge_rows([row], target="*", request="*")[("browse", "*", "*")]
    return {
        "http": http_points(
            run_id=RUN_ID, step="main", scope=Scope.AGENT, agent="a1", interval_start_ms=0, interval_ms=1000, rows=[row]
        )[0],
        "agent": agent_point(run_id=RUN_ID, agent_id="a1", health=Health(busiest_engine_wait_pct=3.0), at_ms=0),
        "event": event_point(run_id=RUN_ID, event=Event(EventKind.SCENARIO_STARTED, "started", at_ms=0, scenario="a")),
        "controller": controller_point(
            run_id=RUN_ID, sample=ControllerSample(0, loop_lag_ms=1.0, cpu_pct=5.0, rss_mb=80.0, agents=1)
        ),
        "step": [
            step_point(
                run_id=RUN_ID,
                step="main",
                servers=1,
                offered=1.0,
                start_ms=0,
                total=figures_of(total, 1),
                bytes_per_s=1.0,
                generator_bound=False,
                losses=0,
            ),
            *scenario_step_points(run_id=RUN_ID, step="main", servers=1, start_ms=0, scenarios=[SCENARIO_STEP]),
        ],
        "host": host_points(run_id=RUN_ID, host="web1", monitor=WEB_HOST, sample=_host_sample(0))[0],
        "host_process": host_points(run_id=RUN_ID, host="web1", monitor=WEB_HOST, sample=_host_sample(0))[1],
        "host_counter": host_points(run_id=RUN_ID, host="lb1", monitor=LB_HOST, sample=_lb_sample(0, 1))[-1],
        "step_host": step_host_points(
            run_id=RUN_ID, step="main", servers=1, offered=1.0, start_ms=0, hosts=_step_hosts()
        )[0],
        "step_host_counter": step_host_points(
            run_id=RUN_ID, step="main", servers=1, offered=1.0, start_ms=0, hosts=_step_hosts()
        )[-1],
        "drift": drift_point(run_id=RUN_ID, drift=Drift(1000).observe(0, total)),
        "threshold": threshold_points(run_id=RUN_ID, results=[P99], at_ms=0)[0],
        "check": check_points(run_id=RUN_ID, step="main", interval_start_ms=0, rows=[row])[0],
        "step_target": step_target_points(
            run_id=RUN_ID,
            step="main",
            servers=1,
            offered=1.0,
            start_ms=0,
            targets=[_target_figures("http://127.0.0.2:80")],
        )[0],
        "feed_rows": feed_points(run_id=RUN_ID, rows={"used": 3}, at_ms=0)[0],
    }


def _target_figures(url: str):
    from loadfleet.controller.analysis.steps import target_figures

    return target_figures(_row(url, "*", 150), 10)


SCENARIO_STEP = ScenarioStepResult("browse", 10, 10, 100, 99, 10.0, 9.9, 2.0, 1.5, 3.0, 4.0, 1.0, 4.0, swept=True)


def test_the_doc_lists_exactly_the_tags_and_fields_the_controller_writes():
    schema = doc_schema()
    points = all_points()
    assert set(schema) == set(points)
    for measurement, made in points.items():
        tags, fields = schema[measurement]
        made = made if isinstance(made, list) else [made]
        assert tags == {k for point in made for k, _ in point.tags}, measurement
        assert fields == {k for point in made for k, _ in point.fields}, measurement


def test_the_doc_has_examples_of_every_measurement():
    queries = doc_queries()
    assert len(queries) >= 10
    for measurement in (
        "http",
        "agent",
        "event",
        "step",
        "host",
        "host_process",
        "host_counter",
        "step_host",
        "step_host_counter",
        "drift",
        "step_target",
        "controller",
        "threshold",
        "check",
        "feed_rows",
    ):
        assert any(f'FROM "{measurement}"' in q for q in queries)


def test_every_influxql_example_of_the_doc_returns_rows(influx):
    fill(influx)
    for query in doc_queries():
        try:
            series = influx.query(query)
        except Exception as exc:  # InfluxDB refused it: say which example
            pytest.fail(f"{query}: {exc}")
        assert series and series[0]["values"], f"no rows: {query}"
