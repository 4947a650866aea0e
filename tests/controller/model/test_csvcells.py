"""CSV cells of run directories: no spreadsheet evaluates a name, and loadfleet reads it back exactly."""

from __future__ import annotations

import csv

import pytest

from loadfleet.controller.model.csvcells import read_cell, safe_row, text_cell
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo
from loadfleet.controller.output.report.intervalsread import _interval_rows
from loadfleet.controller.output.rundir import RunDirWriter
from support.streamdata import interval, row, window

# The audit's request names (red-team-2026-11-27, B11) and the other characters that start a formula.
NAMES = [
    '=HYPERLINK("http://127.0.0.67:18080/x","click")',
    "@SUM(1+1)*cmd|'/C calc'!A0",
    "+1+2",
    "-2+3",
]
# Plans refuse control characters in names; a cell may still begin with one.
FORMULAS = [*NAMES, "\t=1", "\r=1"]


@pytest.mark.parametrize("name", FORMULAS)
def test_a_formula_is_written_as_text_and_read_back_as_it_was(name):
    cell = text_cell(name)
    assert cell.startswith("'")
    assert read_cell(cell) == name


@pytest.mark.parametrize("name", ["r", "/index.html", "http://127.0.0.2:80", "*", "", "a=b", "'quoted'", "'=1"])
def test_any_other_text_reads_back_as_it_was(name):
    assert read_cell(text_cell(name)) == name


def test_numbers_stay_numbers_even_negative_ones():
    assert safe_row([-1, -2.5, 0, "", "-x"]) == [-1, -2.5, 0, "", "'-x"]


def test_intervals_csv_holds_no_formula_and_the_report_reads_the_names_back(tmp_path):
    writer = RunDirWriter(tmp_path, ["http://t:1"])
    step = window()
    writer.on_interval(interval(step, 10_000, a1=[row(5, request=name) for name in NAMES]))
    writer.close()
    with (tmp_path / "intervals.csv").open(newline="") as f:
        cells = [cell for line in csv.reader(f) for cell in line]
    assert not any(cell.startswith(("=", "+", "@", "\t", "\r")) for cell in cells)
    assert not any(cell.startswith("-") and not _is_number(cell) for cell in cells)
    rows = list(_interval_rows(tmp_path / "intervals.csv"))[1:]
    assert {r.request for r in rows if r.scope == "cluster"} >= set(NAMES)


def test_hosts_csv_holds_no_formula(tmp_path):
    writer = RunDirWriter(tmp_path, ["http://t:1"])
    sample = HostSample(
        at_ms=5, cores=2, cpu_pct=1.0, mem_used_pct=2.0, net_rx_bytes_per_s=0, net_tx_bytes_per_s=0, tcp_established=1
    )
    writer.on_host(window(), "=cmd|' /C calc'!A0", MonitorInfo(role="@web", targets=("+t",)), sample)
    writer.close()
    with (tmp_path / "hosts.csv").open(newline="") as f:
        record = next(csv.DictReader(f))
    assert (record["host"], record["role"], record["targets"]) == ("'=cmd|' /C calc'!A0", "'@web", "'+t")


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
