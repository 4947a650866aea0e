"""steps.csv's bottleneck column: the saturated resource a step's monitors saw, in words, and
empty when they saw none; a step's latency columns empty when no response carried a latency."""

import csv
import io
from dataclasses import asdict, replace

from loadfleet.controller.model.figures import Figures
from loadfleet.controller.model.hostsamples import Bottleneck, Resource
from loadfleet.controller.model.stepresult import StepResult, StepState
from loadfleet.controller.output.stepscsv import LATENCY_COLUMNS, STEP_COLUMNS, steps_csv


def result(name: str, bottleneck: Bottleneck | None) -> StepResult:
    return StepResult(
        **dict.fromkeys(("servers", "level_index", "repetition", "start_ms", "intervals", "requests", "ok"), 1),
        **dict.fromkeys(("offered", "measured_s", "achieved_rps", "ok_rps", "bytes_per_s", "mean_ms"), 1.0),
        **dict.fromkeys(("stddev_ms", "p50_ms", "p90_ms", "p99_ms", "error_pct", "new_conns_per_s"), 1.0),
        concurrent_conns=1.0,
        name=name,
        level=name,
        state=StepState.FINISHED,
        bottleneck=bottleneck,
    )


def test_the_bottleneck_is_a_column_in_words_empty_without_one():
    nginx = Bottleneck(Resource.PROCESS_CPU, "local-host", "nginx", 49.0, 50.0)
    queue = Bottleneck(Resource.BACKEND_QUEUE, "lb", "=HAProxy backend app", 3.0, 0.0)
    text = steps_csv([result("s1", None), result("s2", nginx), result("s3", queue)], [])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert "bottleneck" in STEP_COLUMNS
    assert [r["bottleneck"] for r in rows[:2]] == ["", "nginx at 98 % of its 0.5 CPU on local-host"]
    # A name a monitor reported is text, never a spreadsheet formula.
    assert rows[2]["bottleneck"].startswith("'=HAProxy backend app queueing 3.0 requests")


class NoResponseStep(StepResult):
    """A step whose figures say no response carried a latency (Figures.latency None), the way
    summary.json and intervals.csv are told it."""

    def figures(self) -> Figures:
        return replace(super().figures(), latency=None)


def test_the_latency_of_a_step_without_a_response_is_empty_cells_not_0():
    answered = result("s1", None)
    silent = NoResponseStep(**{**asdict(answered), "name": "s2", "level": "s2"})
    rows = list(csv.DictReader(io.StringIO(steps_csv([answered, silent], []))))
    assert set(LATENCY_COLUMNS) <= set(STEP_COLUMNS)
    assert [rows[0][c] for c in LATENCY_COLUMNS] == ["1.0"] * len(LATENCY_COLUMNS)
    assert [rows[1][c] for c in LATENCY_COLUMNS] == [""] * len(LATENCY_COLUMNS)
    # Its attempts are still counted: only the latency of nothing is left out.
    assert (rows[1]["requests"], rows[1]["achieved_rps"]) == ("1", "1.0")
