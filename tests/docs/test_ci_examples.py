"""docs/ci.md's GitHub Actions workflow and GitLab CI job run as written on this machine.

The YAML blocks are parsed: the plan (which the doc keeps in the repository as `ci/load.yaml`,
written there in the scratch checkout), the GitHub workflow and the GitLab job. The jobs' shell
steps (GitHub's `run:`, GitLab's `before_script`, `script` and `after_script`) run in order, each
with bash as the CI system runs it (`-e`, and GitHub's `-o pipefail`), in a scratch copy of the
checkout's plans and lab specs, within a bound, in a session of its own that is killed if it
outlives it. A step that fails stops the job; the steps that run whatever happened (GitHub's
`if: always()`, GitLab's `after_script`) still run, and stop the lab. Stand-ins for what the CI
system gives, said where they happen:

- the setup lines (`apt-get`, `make setup`) do not run: they install packages and build for
  minutes; the checkout's `.venv` stands in for what `make setup` builds;
- `uses:` steps (checkout, cache, reporters) are the CI system's own and do not run; the
  baselines the cache would restore are 3 copies of this run's own directory (an A/A of one run
  against 3 baselines, so the several-baseline gate runs), copied in just before the gate;
- conditions on the branch (`github.ref`, `CI_COMMIT_BRANCH`) read as a pipeline on main;
- `$GITHUB_PATH` and `$GITHUB_STEP_SUMMARY` are files here, read as the runner reads them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import xmlschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
CI_DOC = ROOT / "docs" / "ci.md"
SCHEMA = ROOT / "tests" / "support" / "junit" / "junit-10.xsd"
_YAML = re.compile(r"^```yaml[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_VENV_BIN = Path(sys.executable).parent

# A step's bound: the lab starts in seconds, the run is 30 s on 2 local agents (plus their
# start and the summary), the gate reads four run directories.
STEP_TIMEOUT_S = 120

# Lines that do not run here, by how they begin: why.
SETUP_LINES = {
    "apt-get": "installs Debian packages as root (this machine has them)",
    "make setup": "builds the venv, the engine and the wheels (minutes, network): the checkout's .venv stands in",
}


@dataclass(frozen=True)
class Step:
    name: str
    script: str
    always: bool = False  # runs after an earlier step failed
    pipefail: bool = False  # GitHub's bash runs with -o pipefail, GitLab's without


PLAN_PATH = "ci/load.yaml"  # where docs/ci.md keeps the pipeline's plan


def _blocks() -> dict[str, dict]:
    """docs/ci.md's YAML blocks: `plan` (it has `targets`), `github` (`jobs`), `gitlab` (the rest)."""
    found = {}
    for match in _YAML.finditer(CI_DOC.read_text(encoding="utf-8")):
        doc = yaml.safe_load(match.group(1))
        found["plan" if "targets" in doc else "github" if "jobs" in doc else "gitlab"] = doc
    return found


def _plan_text() -> str:
    return next(m.group(1) for m in _YAML.finditer(CI_DOC.read_text(encoding="utf-8")) if "targets:" in m.group(1))


def github_steps(doc: dict) -> list[Step]:
    (job,) = doc["jobs"].values()
    return [
        Step(step.get("name", step["run"]), step["run"], "always()" in str(step.get("if", "")), pipefail=True)
        for step in job["steps"]
        if "run" in step
    ]


def gitlab_steps(doc: dict) -> list[Step]:
    (job,) = (j for j in doc.values() if isinstance(j, dict) and "script" in j)
    steps = [Step(key, "\n".join(job[key])) for key in ("before_script", "script") if key in job]
    if "after_script" in job:
        steps.append(Step("after_script", "\n".join(job["after_script"]), always=True))
    return steps


def test_the_doc_has_a_github_workflow_and_a_gitlab_job_with_the_run_and_the_gate():
    blocks = _blocks()
    assert set(blocks) == {"plan", "github", "gitlab"}
    assert blocks["plan"]["duration_s"] >= 20  # the gate judges nothing from fewer than 20 intervals
    for steps in (github_steps(blocks["github"]), gitlab_steps(blocks["gitlab"])):
        text = "\n".join(s.script for s in steps)
        assert "loadfleet-lab up" in text and "loadfleet-lab down" in text
        assert f"loadfleet run {PLAN_PATH} --local 2" in _logical(text)
        assert re.search(r"loadfleet run .*--threshold .*--junit \S+ --markdown \S+", _logical(text))
        assert re.search(r"loadfleet compare baselines/\*/ runs/\*/ --gate \S+ --gate \S+", _logical(text))
        assert "head -n -10" in text  # main keeps its last 10 runs as the baselines
        assert any(s.always and "loadfleet-lab down" in s.script for s in steps)  # the lab stops on failure


# ------------------------------------------------------------------ making a step runnable here


def _logical(script: str) -> str:
    """Lines continued with a backslash joined, so a command is one line."""
    return re.sub(r"\\\n\s*", "", script)


def runnable(script: str) -> tuple[str, list[str]]:
    """The script as it runs here, and what was left out, in words."""
    lines, left_out = [], []
    for line in _logical(script).splitlines():
        command = line.strip()
        setup = next((why for start, why in SETUP_LINES.items() if command.startswith(start)), None)
        if setup:
            lines.append(": setup left out")
            left_out.append(f"{command.split()[0]} {command.split()[1]}: {setup}")
        else:
            lines.append(line)
    gate = next((i for i, line in enumerate(lines) if line.strip().startswith("loadfleet compare")), None)
    if gate is not None:
        # before the job's own `if [ -d baselines ]`, which must find what the cache would restore
        guard = next((i for i in range(gate, -1, -1) if lines[i].strip().startswith("if [ -d baselines ]")), gate)
        lines.insert(guard, BASELINES_STAND_IN)
    return "\n".join(lines) + "\n", left_out


# The CI cache's stand-in: main's last 10 runs, here 10 copies of this one (named to sort first).
BASELINES_STAND_IN = (
    "[ -d baselines ] || { mkdir baselines && for i in $(seq 10); do cp -r runs/*/ baselines/0-main-$i; done; }"
    "  # the CI cache's stand-in"
)


def _help(*command: str) -> str:
    done = subprocess.run(["loadfleet", *command, "--help"], capture_output=True, text=True, timeout=60, check=False)
    return done.stdout


# ------------------------------------------------------------------ running a job


def _scratch(tmp_path: Path) -> Path:
    for folder in ("plans", "targets/specs"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    (tmp_path / ".venv").symlink_to(_VENV_BIN.parent)
    (tmp_path / PLAN_PATH).parent.mkdir()
    (tmp_path / PLAN_PATH).write_text(_plan_text(), encoding="utf-8")
    return tmp_path


def _environment(tmp_path: Path) -> dict[str, str]:
    """This machine's environment without loadfleet on the PATH (the workflow puts it there)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOADFLEET_", "GITHUB_", "CI_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != _VENV_BIN)
    env["GITHUB_PATH"] = str(tmp_path / ".github_path")
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / ".step_summary.md")
    env["CI_COMMIT_BRANCH"] = env["CI_DEFAULT_BRANCH"] = "main"
    return env


def _run_step(step: Step, script: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Exit code and output of one step; a step over its bound is killed with its session."""
    flags = ["-e", "-o", "pipefail"] if step.pipefail else ["-e"]
    proc = subprocess.Popen(
        ["bash", *flags, "-c", script],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -1, out + f"\n(killed after {STEP_TIMEOUT_S} s)"
    return proc.returncode, out


def _github_path(env: dict[str, str]) -> None:
    """The runner prepends each line a step wrote to $GITHUB_PATH to the next steps' PATH."""
    added = Path(env["GITHUB_PATH"])
    if added.exists():
        entries = [line for line in added.read_text().splitlines() if line]
        env["PATH"] = os.pathsep.join([*reversed(entries), env["PATH"]])


def _stop_labs(cwd: Path) -> None:
    """Servers a failed job left up (a lab's state directory holds lab.json), by their PIDs."""
    for state in cwd.glob("build/*/lab.json"):
        subprocess.run(
            [str(_VENV_BIN / "loadfleet-lab"), "down", "--state-dir", str(state.parent)],
            cwd=cwd,
            capture_output=True,
            timeout=60,
            check=False,
        )


def run_job(steps: list[Step], cwd: Path, env: dict[str, str]) -> tuple[list[str], list[str], bool]:
    """Runs the steps in order; returns what failed and what was left out, in words, and whether
    the job left a lab up (its state file is there still: `down` removes it)."""
    failed: list[str] = []
    left_out: list[str] = []
    left_up = True
    try:
        for step in steps:
            if failed and not step.always:
                continue
            script, skipped = runnable(step.script)
            left_out += skipped
            code, out = _run_step(step, script, cwd, env)
            _github_path(env)
            if code != 0:
                failed.append(f"step {step.name!r} exited {code}:\n{out[-3000:]}")
        left_up = any(cwd.glob("build/*/lab.json"))
    finally:
        _stop_labs(cwd)
    return failed, left_out, left_up


@pytest.mark.process
@pytest.mark.parametrize("system", ["github", "gitlab"])
def test_the_ci_example_runs_as_written(system, tmp_path):
    doc = _blocks()[system]
    steps = github_steps(doc) if system == "github" else gitlab_steps(doc)
    cwd = _scratch(tmp_path)
    env = _environment(tmp_path)

    failed, left_out, left_up = run_job(steps, cwd, env)

    assert not failed, "\n".join(failed)
    assert not left_up, "the job left its lab up"
    assert all(line.startswith(tuple(SETUP_LINES)) for line in left_out), left_out  # only the setup
    # What the pipeline keeps: a valid JUnit report without a failure, a green summary, one run.
    xmlschema.XMLSchema(SCHEMA).validate(cwd / "results.xml")
    assert "<failure" not in (cwd / "results.xml").read_text(encoding="utf-8")
    summary = (cwd / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("✅"), summary
    assert len([p for p in (cwd / "runs").iterdir() if p.is_dir()]) == 1
    xmlschema.XMLSchema(SCHEMA).validate(cwd / "gate.xml")
    gate_md = (cwd / "gate.md").read_text(encoding="utf-8")
    assert gate_md.startswith("✅") and "10 baseline runs" in gate_md  # an A/A of one run passes
    assert len(list((cwd / "baselines").iterdir())) == 10  # the run kept, the oldest copy dropped
    if system == "github":
        assert Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8").startswith(summary)


@pytest.mark.parametrize(
    ("script", "expected", "left_out"),
    [
        ("apt-get update -qq && apt-get install -y make", ": setup left out\n", ["apt-get update"]),
        ("make setup", ": setup left out\n", ["make setup"]),
        ("loadfleet run p.yaml \\\n  --junit r.xml", "loadfleet run p.yaml --junit r.xml\n", []),
        (
            "loadfleet compare baselines/*/ runs/*/ --gate p99_ms:+10%",
            f"{BASELINES_STAND_IN}\nloadfleet compare baselines/*/ runs/*/ --gate p99_ms:+10%\n",
            [],
        ),
    ],
)
def test_only_the_setup_is_left_out_and_the_gate_finds_a_baseline(script, expected, left_out):
    text, skipped = runnable(script)
    assert text == expected
    assert len(skipped) == len(left_out)
    assert all(s.startswith(prefix) for s, prefix in zip(skipped, left_out, strict=True))
