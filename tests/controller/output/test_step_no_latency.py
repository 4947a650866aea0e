"""A step whose target only refused connections: its latency is nothing in steps.csv (empty
cells, the step's and the target's), null in summary.json, "-" on the console, and its figures
say None (the step point leaves it out)."""

import csv
import io

from loadfleet.controller.analysis.steps import StepMeter
from loadfleet.controller.analysis.summary import summarize
from loadfleet.controller.analysis.totals import RunTotals
from loadfleet.controller.model.stepresult import StepState
from loadfleet.controller.output.console import steps_table
from loadfleet.controller.output.sinks.steppoints import step_target_points
from loadfleet.controller.output.stepscsv import LATENCY_COLUMNS, steps_csv
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.plan.steps import expand
from loadfleet.v1 import stats_pb2
from loadfleet.wire.stats import StatsRow
from support.streamdata import interval, window

REFUSED = "http://127.0.0.2:18081"
PLAN = f"""
targets: [{{url: '{REFUSED}'}}]
workload: {{requests: [{{name: r, path: /}}]}}
load: {{model: closed}}
sweep: {{steps: [4], step_s: 4}}
"""


def refused_step():
    spec = expand(parse_plan(PLAN))[0]
    step = window("s1", start_ms=10_000, seconds=4, cooldown_ms=1000)
    meter = StepMeter()
    for i in range(3):
        row = StatsRow(REFUSED, "r", requests=40, errors={stats_pb2.ERROR_KIND_CONNECT_REFUSED: 40})
        meter.on_interval(interval(step, 10_000 + 1000 * i, a1=[row]))
    return meter.result(spec, step, StepState.FINISHED)


def test_a_step_without_a_response_has_empty_latency_cells():
    result = refused_step()
    assert result.requests == 120 and not result.latency_measured and result.figures().latency is None
    [r] = list(csv.DictReader(io.StringIO(steps_csv([result], [REFUSED]))))
    assert [r[c] for c in LATENCY_COLUMNS] == [""] * len(LATENCY_COLUMNS)
    assert (r[f"mean_ms {REFUSED}"], r[f"p99_ms {REFUSED}"], r[f"rps {REFUSED}"]) == ("", "", "40.0")


def test_the_step_target_point_of_a_target_without_a_response_has_no_latency_fields():
    [target] = refused_step().targets
    [point] = step_target_points(run_id="r", step="s1", servers=1, offered=4, start_ms=0, targets=[target])
    assert [k for k, _ in point.fields] == ["offered", "achieved_rps", "ok_rps", "requests", "error_pct"]


def test_summary_json_has_null_latency_for_the_step_and_its_target_and_the_console_a_dash():
    result = refused_step()
    summary = summarize(
        run_id="r",
        plan_name="refused",
        state="finished",
        message="",
        run_dir="",
        started_ms=10_000,
        totals=RunTotals(),
        agent_ids=["a1"],
        events=[],
        steps=(result,),
    ).to_json()
    [step] = summary["steps"]
    assert [step[k] for k in ("mean_ms", "stddev_ms", "p50_ms", "p90_ms", "p99_ms")] == [None] * 5
    assert step["requests"] == 120 and step["achieved_rps"] > 0  # the attempts are still figures
    [target] = step["targets"]
    assert [target[k] for k in ("mean_ms", "stddev_ms", "p50_ms", "p99_ms")] == [None] * 4
    line = steps_table(summary).splitlines()[1].split()
    assert line[0] == "s1" and line[7:9] == ["-", "-"], line  # mean and p99
