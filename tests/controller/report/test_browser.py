"""report.html and compare.html as a real browser (headless Debian chromium) renders them."""
from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from loadfleet.controller.report import REPORT_FILE, load_run, write_compare

pytestmark = pytest.mark.e2e

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run")
ERROR_MARKERS = ("no data", "NaN", "Infinity", "undefined", "Traceback", "parsererror")


def chromium(processes, tmp_path: Path, *args: str) -> str:
    """Runs chromium to its end; its whole process group is stopped by PID in any case."""
    program = shutil.which("chromium")
    if program is None:
        pytest.fail("chromium is not installed (make system-deps, or apt-get install chromium)")
    proc = subprocess.Popen([program, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True, text=True)
    processes.started.append(proc)  # the fixture stops it if anything below fails
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        try:  # helpers (zygote, renderer) may outlive the browser process
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, err[-2000:]
    return out


def png_facts(path: Path) -> tuple[int, int, int]:
    """(width, height, number of distinct byte values in the pixel data) of a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    pixels, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            pixels += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(pixels)))


def test_chromium_renders_the_report_with_every_plot(real_run, processes, tmp_path):
    report = real_run.run_dir / REPORT_FILE
    dom = chromium(processes, tmp_path, "--dump-dom", report.as_uri())
    assert f"loadfleet run {real_run.summary['run_id']}" in dom
    assert dom.count('<svg class="chart"') == 6
    # total rps, 4 percentiles, connect_refused, connections, 2 targets, 1 agent
    assert dom.count("<polyline") >= 10
    for marker in ERROR_MARKERS:
        assert marker not in dom
    shot = tmp_path / "report.png"
    chromium(processes, tmp_path, f"--screenshot={shot}", "--window-size=1400,2600", report.as_uri())
    width, height, variety = png_facts(shot)
    assert (width, height) == (1400, 2600)
    assert variety > 50  # text, lines and colours, not a blank page


def test_chromium_renders_the_comparison(real_run, synthetic_run, processes, tmp_path):
    out = write_compare([load_run(real_run.run_dir), load_run(synthetic_run)], tmp_path / "compare.html")
    dom = chromium(processes, tmp_path, "--dump-dom", out.as_uri())
    assert dom.count('<svg class="chart"') == 2
    assert dom.count("<polyline") == 4  # two runs on two plots
    assert real_run.summary["run_id"] in dom and synthetic_run.name in dom
    for marker in ERROR_MARKERS:
        assert marker not in dom
