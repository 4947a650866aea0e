"""Every shell example of the docs runs here, or is skipped for a reason written down.

The examples are the ```sh, ```bash and ```console blocks of README.md and docs/*.md. Each is
named by its file and its first command, and must be in exactly one of RUN (run here, on
loopback, in a scratch copy of the checkout's plans and lab specs, within its timeout, exit 0)
or SKIP (with why it cannot run here). A new or changed example is in neither until someone
decides, so it fails `test_every_example_is_run_or_skipped`.

A block whose lines start with `$ ` is a transcript: its `$ ` lines are the commands. Any other
block runs as one bash script, line continuations and comments included.
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

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
_FENCE = re.compile(r"^```(?:sh|bash|console)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_PROMPT = "$ "

# The quickstart lab and run: 2 nginx on 127.0.0.2:18081 and 127.0.0.3:18081 (fixed by the
# spec), a 10 s run on 2 local agents; ~20 s.
_LAB_RUN_S = 60

# Examples run here: name -> timeout in seconds.
RUN: dict[str, float] = {
    "docs/cli.md: loadfleet --help": 30,
    "docs/cli.md: loadfleet-lab tree build/tree30k --kind files30k --count 20": 30,
    "docs/lab.md: loadfleet-lab up targets/specs/quickstart.yaml --state-dir build/quickstart-lab": _LAB_RUN_S,
    "docs/security.md: loadfleet certs init --dir pki": 30,
}

_BUILDS = "builds the venv, the engine and wheels (minutes, network)"
_FLEET = "a fleet on other hosts (ctrl.example, load hosts), and servers that run until stopped"
_BENCH = "a benchmark: minutes, pinned to both cores, needs the machine to itself"
_MONITOR = "monitor agents that dial a controller and run until stopped"
_HOSTLAB = (
    "network namespaces, a bridge and a guard route on this host, and files not in the repository "
    "(tests/targets start such labs)"
)

# Examples that cannot run here: name -> why.
SKIP: dict[str, str] = {
    "README.md: make demo": "make demo and make test install Debian packages and build everything (minutes)",
    "README.md: export PATH=$PWD/.venv/bin:$PATH": (
        "the servers, run and stop of docs/lab.md's first example, which runs here: on the same fixed ports, "
        "a second 20 s run would show nothing more"
    ),
    "README.md: loadfleet certs init --dir pki": _FLEET,
    "docs/benchmarks.md: .venv/bin/python -m bench.engine.bench --runs 15": _BENCH,
    "docs/benchmarks.md: .venv/bin/python -m bench.engine.syscalls": _BENCH + "; perf",
    "docs/benchmarks.md: .venv/bin/python -m bench.engine.journey --runs 5 --duration-s 3": _BENCH,
    "docs/benchmarks.md: .venv/bin/python -m bench.engine.h2 --runs 9 --duration-s 5": _BENCH,
    "docs/benchmarks.md: git worktree add --detach build/no-phases HEAD": _BENCH + "; a second engine build",
    "docs/benchmarks.md: .venv/bin/python -m bench.fleet.bench --agents 1000 --rows 10 --interval-ms 1000 "
    "--duration-s 1800 --processes 2": _BENCH + " (tests/bench runs the fleet bench small)",
    "docs/benchmarks.md: .venv/bin/python -m bench.fleet.real --agents 63 --duration-s 60 --out "
    "bench/fleet/results/<date>-real-63-60s.json": _BENCH,
    "docs/benchmarks.md: .venv/bin/python -m bench.fleet.tls_cost --agents 300 --idle-s 20 --rounds 3": _BENCH,
    "docs/benchmarks.md: PYTHONPATH=tests .venv/bin/python -m bench.sink.bench": _BENCH,
    "docs/benchmarks.md: .venv/bin/python -m bench.gate.aa_ab --pairs 20 --duration-s 30": _BENCH,
    "docs/benchmarks.md: .venv/bin/python -m bench.gate.aa_ab --pairs 20 --baselines 3 --duration-s 30": _BENCH,
    "docs/benchmarks.md: .venv/bin/python -m bench.gate.aa_ab --pairs 20 --baselines 10 --duration-s 30": _BENCH,
    "docs/cli.md: loadfleet-agent --controller ctrl:7700 --id web1 --monitor --target http://10.0.0.7:8080 "
    "--process nginx": _MONITOR,
    "docs/cli.md: loadfleet-agent --controller ctrl:7700 --id lb1 --monitor --role lb --process haproxy": _MONITOR,
    "docs/compose.md: docker compose up -d --build": "Docker",
    "docs/deploy.md: make demo-deps dist": _BUILDS,
    "docs/deploy.md: scp -r dist pki/ca.crt pki/controller.crt pki/controller.key deploy/systemd "
    "ctrl.example:lf/": "remote hosts over ssh",
    "docs/deploy.md: printf '[load]\\n' > hosts.ini; seq -f 'load-%02g.example' 1 60 >> hosts.ini": "Ansible "
    "against remote hosts",
    "docs/deploy.md: for n in $(seq -f '%02g' 1 60); do": "remote hosts over ssh",
    "docs/deploy.md: export LOADFLEET_CONTROLLER=ctrl.example:7700 LOADFLEET_TLS_CA=pki/ca.crt": _FLEET,
    "docs/deploy.md: docker build -f controller/Dockerfile -t "
    "registry.example/lt/loadfleet-controller:0.1.0 .": "Docker and a registry",
    "docs/deploy.md: loadfleet certs init --dir pki": "kubectl and a Kubernetes cluster",
    "docs/deploy.md: helm install loadfleet deploy/helm/loadfleet -n loadtest": "helm and a Kubernetes cluster",
    "docs/lab.md: loadfleet-lab up lab.yaml --state-dir build/lab": (
        "lab.yaml stands for the reader's spec (an NFS docroot, HAProxy, Varnish); " + _MONITOR
    ),
    "docs/lab.md: loadfleet-lab up targets/specs/hosts.yaml --state-dir build/hostlab": _HOSTLAB,
    "docs/lab.md: loadfleet-lab exec --state-dir build/hostlab ctrl -- loadfleet agents": _HOSTLAB,
    "docs/lab.md: loadfleet run plan.yaml --local 2 --monitor nginx": "plan.yaml stands for the reader's plan; "
    + _MONITOR,
    "docs/metrics.md: mkdir -p build/influxdb": (
        "InfluxDB on the fixed port 8086, left running, and the demo's servers up "
        "(tests/e2e/test_influx.py starts influxd the same way on free ports)"
    ),
    "docs/metrics.md: loadfleet controller --influx-url http://127.0.0.1:8086": "a controller that serves "
    "until stopped, and an InfluxDB on port 8086",
    "docs/plans.md: loadfleet-lab up targets/specs/journey.yaml --state-dir build/journey": (
        "HOST:PORT stands for the app's address `up` prints, and the plan runs 60 s; tests/e2e/test_scenarios.py "
        "runs it shortened against the same app"
    ),
    "docs/reproductions.md: loadfleet-lab up plans/repro-lb.lab.yaml --state-dir build/repro-lb": (
        "Apache, PHP-FPM and HAProxy for a 45 s run: over this test's time (bench.repro and tests/e2e run the labs)"
    ),
    "docs/security.md: loadfleet controller --listen 0.0.0.0:7700": _FLEET,
    "docs/security.md: openssl rand -hex 32": "a file's contents among the commands, and a controller that serves "
    "until stopped",
    "docs/security.md: loadfleet-agent ... --allow-targets 10.20.0.0/16,web1.example:443,[fd00::/64]:8080": (
        "`...` stands for the agent's other flags"
    ),
}


@dataclass(frozen=True)
class Example:
    doc: str
    line: int
    block: str

    @property
    def commands(self) -> list[str]:
        lines = self.block.splitlines()
        prompted = [line[len(_PROMPT) :] for line in lines if line.startswith(_PROMPT)]
        return prompted or lines

    @property
    def script(self) -> str:
        return "\n".join(self.commands) + "\n"

    @property
    def name(self) -> str:
        """The file and the first command's first line, its comment left out."""
        first = next(line.strip() for line in self.commands if line.strip() and not line.lstrip().startswith("#"))
        first = re.sub(r"\s+#.*$", "", first).rstrip(" \\")
        return f"{self.doc}: {' '.join(first.split())}"


def examples() -> list[Example]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(Example(str(path.relative_to(ROOT)), line, match.group(1)))
    return found


def _by_name() -> dict[str, Example]:
    return {example.name: example for example in examples()}


def test_every_example_is_run_or_skipped():
    names = [example.name for example in examples()]
    assert len(names) == len(set(names)), "two examples of one file begin with the same command"
    undecided = [f"{e.doc}:{e.line}: {e.name!r}" for e in examples() if e.name not in RUN and e.name not in SKIP]
    assert not undecided, "run these examples (RUN) or say why they cannot run here (SKIP):\n" + "\n".join(undecided)


def test_the_lists_name_only_examples_that_exist():
    assert not set(RUN) & set(SKIP)
    stale = sorted((set(RUN) | set(SKIP)) - set(_by_name()))
    assert not stale, f"no example begins so any more: {stale}"


def _scratch_checkout(tmp_path: Path) -> Path:
    """The files the examples name, copied (they write next to them: build/, runs/, pki/)."""
    for folder in ("plans", "targets/specs"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return tmp_path


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADFLEET_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _stop_labs(cwd: Path, env: dict[str, str]) -> None:
    """Servers a failed example left up (a lab's state directory holds lab.json)."""
    for state in cwd.glob("build/*/lab.json"):
        subprocess.run(
            ["loadfleet-lab", "down", "--state-dir", str(state.parent)],
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )


@pytest.mark.process
@pytest.mark.parametrize("name", sorted(RUN))
def test_example_runs(name, tmp_path):
    example = _by_name().get(name)
    if example is None:
        pytest.fail(f"no example {name!r} any more (test_the_lists_name_only_examples_that_exist)")
    cwd = _scratch_checkout(tmp_path)
    env = _environment()
    proc = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", example.script],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=RUN[name])
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{example.doc}:{example.line} did not end within {RUN[name]} s:\n{output[-3000:]}")
    finally:
        _stop_labs(cwd, env)
    assert proc.returncode == 0, f"{example.doc}:{example.line} exited {proc.returncode}:\n{output[-3000:]}"
