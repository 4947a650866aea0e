"""report.html's "Where the time goes": a stacked bar per total, target and request."""

from __future__ import annotations

import re
from dataclasses import asdict

from loadfleet.controller.model.figures import figures_of
from loadfleet.controller.output.report.phases import phases_section
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.phases import Phase, Phases
from loadfleet.wire.stats import StatsRow


def _entry(name: str, waiting_us: int, phases: bool = True, queueing_us: int = 0) -> dict:
    row = StatsRow(
        "t",
        "r",
        requests=2,
        status=[0, 2, 0, 0, 0],
        histogram=Histogram.of([waiting_us + 500] * 2),
        phases=Phases(
            connect=Phase(1, 200, 200),
            waiting=Phase(2, 2 * waiting_us, waiting_us),
            receiving=Phase(2, 100, 50),
            waiting_histogram=Histogram.of([waiting_us] * 2),
            queueing=Phase(2, 2 * queueing_us, queueing_us),
        )
        if phases
        else None,
    )
    return {"name": name, "figures": asdict(figures_of(row, 1.0))}


def test_one_bar_per_entry_with_a_segment_per_measured_phase():
    summary = {
        "total": _entry("*", 3000),
        "targets": [_entry("http://a", 1000), _entry("http://b", 5000, queueing_us=2000)],
        "requests": [_entry("home", 3000)],
    }
    html = "".join(phases_section(summary))
    assert "<h2>Where the time goes</h2>" in html and "<script" not in html
    labels = re.findall(r'text-anchor="end">([^<]+)</text>', html)
    assert labels == ["total", "target http://a", "target http://b"]  # one request: no bar of its own
    titles = re.findall(r"<title>([^<]+)</title>", html)
    assert "target http://b: waiting (time to first byte) 5.000 ms" in titles
    assert "target http://b: queueing (for a worker, connection or stream) 2.000 ms" in titles
    assert not any(t.startswith("target http://a: queueing") for t in titles), "nothing queued: no segment"
    assert not any("TLS" in t for t in titles), "a phase not measured has no segment"
    assert html.count("<tr>") == 1 + 3  # the table: its header, a row per bar


def test_nothing_when_no_driver_measured_phases():
    assert phases_section({"total": _entry("*", 1000, phases=False)}) == []
    assert phases_section({"total": {"figures": {"phases": None}}}) == []
