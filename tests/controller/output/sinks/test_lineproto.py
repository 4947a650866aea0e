"""Line protocol InfluxDB takes: a figure that is no number is left out, never written
(issue 28, the twelfth: one agent's NaN made InfluxDB refuse every batch of a run, and the
controller logged a 2 KB error line every second)."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest

from loadfleet.controller.model.health import Health
from loadfleet.controller.output.sinks.influx import InfluxRejected, InfluxSink
from loadfleet.controller.output.sinks.lineproto import Point
from loadfleet.controller.output.sinks.points import agent_point


@pytest.mark.parametrize(
    "fields, line",
    [
        ((("cpu", math.nan), ("rss", 2.5)), "agent,agent=a rss=2.5 1000"),
        ((("cpu", math.inf), ("n", 3), ("ok", True)), "agent,agent=a n=3i,ok=true 1000"),
        ((("cpu", -math.inf), ("text", "nan")), 'agent,agent=a text="nan" 1000'),
        ((("cpu", 0.0), ("big", 1e308)), "agent,agent=a cpu=0.0,big=1e+308 1000"),
        ((("cpu", math.nan), ("mem", math.nan)), ""),  # no field left: no point
    ],
)
def test_a_float_field_that_is_no_number_is_left_out(fields, line):
    assert Point("agent", (("agent", "a"),), fields, 1000).line() == line


def test_a_line_break_in_a_tag_cannot_end_the_line():
    point = Point("host", (("host", "h\nevil,x=1 y=2 3"),), (("n", 1),), 5)
    assert point.line() == "host,host=h\\ evil\\,x\\=1\\ y\\=2\\ 3 n=1i 5"


def test_an_agent_point_of_a_nan_figure_is_written_without_it():
    line = agent_point(run_id="r", agent_id="a", health=Health(cpu_pct=math.nan, rss_mb=math.inf), at_ms=1000).line()
    assert line.startswith("agent,") and " cpu_pct=" not in line and ",cpu_pct=" not in line and "rss_mb" not in line
    assert "nan" not in line.lower() and "inf" not in line.lower()


def test_a_refused_batch_is_logged_once_a_period_with_the_count_since(tmp_path, caplog):
    def refuse(lines):
        raise InfluxRejected("InfluxDB refused a batch: 400 " + "x" * 2000)

    async def go():
        sink = InfluxSink(refuse, tmp_path / "spool", batch_points=1)
        for i in range(5):
            sink.add([Point("m", (), (("i", i),), i)])
        await sink.close(timeout_s=2)
        return sink

    with caplog.at_level(logging.ERROR, logger="loadfleet.controller.output.sinks.influx"):
        sink = asyncio.run(go())
    assert sink.rejected_points == 5
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 1 and len(refusals[0]) < 500, refusals
