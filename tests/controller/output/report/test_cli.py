"""`loadfleet report` and `loadfleet compare` as a user runs them, on a real run directory."""

import json
import subprocess

import pytest

from loadfleet.controller.output.report import REPORT_FILE
from support.procs import program

pytestmark = pytest.mark.e2e


def loadfleet(*args, cwd=None):
    return subprocess.run([program("loadfleet"), *map(str, args)], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_a_real_run_writes_its_report_at_the_end(real_run):
    html = (real_run.run_dir / REPORT_FILE).read_text()
    assert f"loadfleet run {real_run.summary['run_id']}" in html
    assert f"{real_run.summary['total']['figures']['requests']:,}" in html
    # Both targets got load, the refusing one shows up as connect_refused failures.
    assert f'data-name="{real_run.nginx_url}"' in html and f'data-name="{real_run.refused_url}"' in html
    assert 'data-name="connect_refused"' in html
    assert real_run.summary["total"]["errors"]["connect_refused"] > 0


def test_report_writes_the_report_again_where_asked(real_run, tmp_path):
    out = tmp_path / "again.html"
    result = loadfleet("report", real_run.run_dir, "--out", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"wrote {out}\n"
    assert out.read_text() == (real_run.run_dir / REPORT_FILE).read_text()


def test_compare_prints_the_runs_side_by_side_and_writes_html(real_run, synthetic_run, tmp_path):
    result = loadfleet("compare", real_run.run_dir, synthetic_run, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split() == [real_run.summary["run_id"], synthetic_run.name]
    requests = next(line for line in lines if line.startswith("requests"))
    assert f"{real_run.summary['total']['figures']['requests']:,}" in requests
    assert lines[-1] == "wrote compare.html"
    html = (tmp_path / "compare.html").read_text()
    assert html.count('<svg class="chart"') == 2


def test_compare_json(real_run, synthetic_run, tmp_path):
    out = tmp_path / "c.html"
    result = loadfleet("compare", real_run.run_dir, synthetic_run, "--json", "--out", out)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["html"] == str(out) and out.exists()
    first = doc["runs"][0]
    figures = real_run.summary["total"]["figures"]
    assert (first["run_id"], first["requests"], first["p99_ms"]) == (
        real_run.summary["run_id"],
        figures["requests"],
        figures["latency"]["p99_ms"],
    )
    assert first["error_pct"] == pytest.approx(figures["error_pct"])


def _bad_inputs(tmp_path, good):
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    return {
        "missing": (["report", tmp_path / "nope"], "no such run directory"),
        "a file": (["report", a_file], "not a directory"),
        "no summary": (["report", not_a_run], "not a run directory with results"),
        "out dir missing": (["report", good, "--out", tmp_path / "no" / "r.html"], "cannot write"),
        "out is a dir": (["report", good, "--out", tmp_path], "it is a directory"),
        "one run": (["compare", good], "at least two run directories"),
        "one bad run": (["compare", good, not_a_run, "--out", tmp_path / "c.html"], "not a run directory"),
    }


@pytest.mark.parametrize(
    "case", ["missing", "a file", "no summary", "out dir missing", "out is a dir", "one run", "one bad run"]
)
def test_bad_input_is_one_line_and_exit_2(case, synthetic_run, tmp_path):
    args, message = _bad_inputs(tmp_path, synthetic_run)[case]
    result = loadfleet(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("loadfleet: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "c.html").exists()  # nothing is written when a run cannot be read


@pytest.mark.parametrize("args", [["report"], ["compare"], ["report", "a", "--bogus"]])
def test_missing_arguments_are_usage_errors(args):
    result = loadfleet(*args)
    assert result.returncode == 2
    assert "usage: loadfleet" in result.stderr and "Traceback" not in result.stderr
