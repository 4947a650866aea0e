"""report.html and compare.html as a real browser (headless Debian chromium) renders them:
the static page, and the interactive charts uPlot draws (a probe script added to a copy of the
page reads the drawn charts, then hovers, drags and clicks the first one)."""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from loadfleet.controller.output.report import REPORT_FILE, load_run, write_compare

pytestmark = pytest.mark.e2e

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
ERROR_MARKERS = ("no data", "NaN", "Infinity", "undefined", "Traceback", "parsererror")
PROBE = Path(__file__).with_name("browser")
# Pixels of a series' colour on its canvas for "drawn" (a 1.6 px line across a chart is hundreds).
MIN_INKED = 50


def chromium(processes, tmp_path: Path, *args: str) -> str:
    """Runs chromium to its end; its whole process group is stopped by PID in any case."""
    program = shutil.which("chromium")
    if program is None:
        pytest.fail("chromium is not installed (make system-deps, or apt-get install chromium)")
    proc = subprocess.Popen(
        [program, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
    )
    processes.started.append(proc)  # the fixture stops it if anything below fails
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):  # helpers (zygote, renderer) may outlive the browser
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err[-2000:]
    return out


def visible_text(dom: str) -> str:
    """The DOM without scripts and styles (the chart library's code holds "NaN" and the like)."""
    return re.sub(r"<(script|style)\b.*?</\1>", "", dom, flags=re.S)


def probe(processes, tmp_path: Path, page: Path) -> dict:
    """What probe.js found in a copy of `page` after its scripts ran."""
    text = page.read_text()
    probed = tmp_path / f"probed-{page.name}"
    probed.write_text(
        text.replace("<head>", f"<head><script>{(PROBE / 'errors.js').read_text()}</script>", 1).replace(
            "</body>", f"<script>{(PROBE / 'probe.js').read_text()}</script></body>", 1
        )
    )
    dom = chromium(
        processes, tmp_path, "--window-size=1400,2000", "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()
    )
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe did not run: " + visible_text(dom)[-2000:]
    return json.loads(html.unescape(found.group(1)))


def assert_charts_drawn(result: dict, titles: list[str]) -> None:
    assert result["errors"] == [] and result["resources"] == [], "no error, nothing fetched"
    assert [c["title"] for c in result["charts"]] == titles
    for chart in result["charts"]:
        assert chart["drawn_title"] == chart["title"], chart
        assert chart["legend"] == chart["series"] and chart["series"], chart
        assert max(chart["inked"]) > MIN_INKED, f"no line drawn on {chart}"
        assert not chart["svg_shown"], chart


def png_facts(path: Path) -> tuple[int, int, int]:
    """(width, height, number of distinct byte values in the pixel data) of a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    pixels, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IDAT":
            pixels += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(pixels)))


def test_chromium_renders_the_report_with_every_plot(real_run, processes, tmp_path):
    report = real_run.run_dir / REPORT_FILE
    dom = chromium(processes, tmp_path, "--dump-dom", report.as_uri())
    assert f"loadfleet run {real_run.summary['run_id']}" in dom
    assert dom.count('<svg class="chart"') == 7
    # total rps, 4 percentiles, connect_refused, connections, 2 targets, 1 agent, the controller's loop lag
    assert dom.count("<polyline") >= 11
    for marker in ERROR_MARKERS:
        assert marker not in visible_text(dom)
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
        assert marker not in visible_text(dom)
    result = probe(processes, tmp_path, out)
    assert_charts_drawn(result, ["Requests/s (cluster)", "p99 latency (cluster)"])
    assert [c["series"] for c in result["charts"]] == [[real_run.summary["run_id"], synthetic_run.name]] * 2
    assert all(min(c["inked"]) > MIN_INKED for c in result["charts"]), "each run's line is drawn"


TIME_CHARTS = [
    "Requests/s (cluster)",
    "Latency percentiles (cluster, log scale)",
    "Failures by kind (cluster)",
    "Concurrent users and open connections (cluster)",
    "Requests/s by target",
    "Requests/s by agent",
    "Controller: event-loop lag (the worst of each second)",
]


def test_uplot_draws_every_chart_with_hover_zoom_and_toggles(real_run, processes, tmp_path):
    result = probe(processes, tmp_path, real_run.run_dir / REPORT_FILE)
    assert_charts_drawn(result, TIME_CHARTS)
    rps = result["charts"][0]
    # Attempts and successes, two lines (a quarter of the requests go to a refusing target).
    assert rps["series"] == ["req/s", "ok/s"] and min(rps["inked"]) > MIN_INKED
    # The cursor over the first chart shows its value in its legend, and the same moment on the
    # next chart (they share the time cursor).
    assert all(re.fullmatch(r"[\d,.]+", value) for value in result["hover"]), result["hover"]
    (before_lo, before_hi), (after_lo, after_hi) = result["zoom_before"], result["zoom_after"]
    assert before_lo < after_lo < after_hi < before_hi, "dragging zoomed into a range"
    assert result["first_series_shown"] is False, "a click on its legend entry hid the series"


def test_a_chart_that_cannot_be_drawn_is_an_error_and_keeps_its_static_chart(synthetic_run, processes, tmp_path):
    page = tmp_path / "broken.html"
    text = (synthetic_run / REPORT_FILE).read_text()
    page.write_text(text.replace('"data":[[', '"data":[[,', 1))  # the first chart's data, unreadable
    result = probe(processes, tmp_path, page)
    [error] = result["errors"]
    assert error.startswith("error: loadfleet: chart ? not drawn: SyntaxError"), error
    first, *others = result["charts"]
    assert first["svg_shown"] is True, "the static chart stays"
    assert all(not c["svg_shown"] and max(c["inked"]) > MIN_INKED for c in others), "the others are drawn"
