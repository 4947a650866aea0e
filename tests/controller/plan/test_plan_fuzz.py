"""Property-based fuzzing of the plan parser (hypothesis): thousands of generated plans and
mutated real plans go through `loadfleet validate` (its `main`, in-process) and must end in
exit 0 or 2, never a traceback; whatever is accepted must round-trip through its YAML and
turn into the wire messages agents get without overflowing a field. Generated workload
manifests go the same way, and whatever validate accepts of them, the controller accepts."""

from __future__ import annotations

import contextlib
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadfleet.controller import cli
from loadfleet.controller.fleet.jobs import JobAssignment
from loadfleet.controller.fleet.scheduler import split_over_engines
from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.plan.parse import load_plan, parse_plan
from loadfleet.controller.plan.steps import expand, step_plan
from loadfleet.controller.rpc.jobconvert import assignment_to_proto
from support.lanes import examples
from support.procs import REPO

SEEDS = [p.read_bytes() for p in sorted((REPO / "plans").glob("*.yaml")) if not p.name.endswith(".lab.yaml")]
SEEDS += [
    b"""
name: every block
driver: engine
interval_ms: 500
targets: [{url: "http://127.0.0.2:8080", weight: 3}, {url: "https://[::1]:8443"}]
workload:
  keep_alive: false
  tls_verify: true
  requests:
    - {name: page, path: /index.html, weight: 2, headers: {Authorization: Bearer x, X-A: b}}
    - {name: post, path: /api, method: POST, body: "{}"}
  session: {steps: [{request: page, think: {uniform_ms: [10, 20]}}, {request: post}], repeat: 3}
load: {model: closed, clients: 0, stages: [{duration_s: 2, target: 8}], think: {exponential_ms: 5}}
duration_s: 5
timeouts: {connect_ms: 100, request_ms: 1000}
agents: {count: 2, labels: {zone: a}, wait_s: 3, lease_s: 10}
budget: {requests: 1000}
stop: {error_pct: {above: 5, for_s: 2}, latency: {above_ms: 100, for_s: 1}}
""",
    b"""
targets: [{url: "http://127.0.0.2:8080"}, {url: "http://127.0.0.3:8080"}]
workload: {requests: [{path: /}]}
load: {model: open, poisson: true, max_connections: 64}
sweep: {steps: [100, 200.5, 400], step_s: 4, warmup_s: 1, repeat: 2, servers: [1, 2], stop_at_knee: true}
sinks: {influxdb: {url: "http://127.0.0.1:8086", bucket: b, token_env: LOADFLEET_INFLUX_TOKEN_A}}
""",
    b"""
driver: gatling
duration_s: 5
targets: [{url: "http://127.0.0.2:8080"}]
load: {model: users, users: 10, spawn_rate: 2.5}
gatling: {project: /srv/gatling/demo, simulation: example.HookedSimulation, html_report: true}
""",
]

# Bytes that make YAML interesting: structure, anchors, tags, numbers at the edges.
TOKENS = [
    b"&a ",
    b"*a",
    b"<<: *a\n",
    b"[",
    b"]",
    b"{",
    b"}",
    b": ",
    b"- ",
    b"\n",
    b"\n  ",
    b"\t",
    b"'",
    b'"',
    b".nan",
    b".inf",
    b"-.inf",
    b"1e999",
    b"4294967296",
    b"18446744073709551616",
    b"-1",
    b"0",
    b"0x1f",
    b"!!binary ",
    b"!!python/name:os.system",
    b"!!set ",
    b"? ",
    b"---\n",
    b"...\n",
    b"#",
    b"%YAML 1.1\n",
    b"\x00",
    b"\r\n",
    b"\xff",
    b"\xef\xbb\xbf",
    b"\\r\\n",
    b"~",
    b"null",
    b"yes",
    b"on",
    b"2020-01-01",
    b"duration_s: 1\n",
    b"workload: {manifest: /etc/passwd}\n",
    b"token_env: HOME",
    b'headers: {a: "\\n"}',
    # recursive aliases (issue 28): an alias inside the node it names
    b"&r [*r]",
    b"&r {k: *r}",
    b"*r",
    # YAML 1.1 forms that YAML 1.2 reads otherwise
    b"010",
    b"0o17",
    b"1:30",
    b"1_000",
    b"0b11",
    b"off",
    b"no",
]

SCHEMA_KEYS = [
    "name",
    "duration_s",
    "driver",
    "gatling",
    "interval_ms",
    "targets",
    "workload",
    "load",
    "timeouts",
    "agents",
    "sinks",
    "sweep",
    "stop",
    "budget",
    "url",
    "weight",
    "requests",
    "path",
    "method",
    "headers",
    "body",
    "session",
    "steps",
    "request",
    "think",
    "repeat",
    "model",
    "clients",
    "rate",
    "users",
    "spawn_rate",
    "stages",
    "target",
    "max_connections",
    "poisson",
    "fixed_ms",
    "uniform_ms",
    "exponential_ms",
    "connect_ms",
    "request_ms",
    "count",
    "labels",
    "wait_s",
    "lease_s",
    "influxdb",
    "token_env",
    "step_s",
    "warmup_s",
    "servers",
    "error_pct",
    "latency",
    "above",
    "for_s",
    "above_ms",
    "project",
    "simulation",
    "html_report",
    "keep_alive",
    "tls_verify",
    "manifest",
    "bucket",
    "org",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, 2**32 - 1, 2**32, 2**64, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, 1e-300, 1e300]),
    st.text(max_size=30),
    st.sampled_from(
        [
            "http://127.0.0.1:1",
            "https://[::1]:9",
            "/",
            "/a b",
            "GET",
            "closed",
            "open",
            "users",
            "engine",
            "gatling",
            "x\r\ny",
            "\x00",
        ]
    ),
)
keys = st.one_of(st.sampled_from(SCHEMA_KEYS), st.text(max_size=10))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=30,
)


printable = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=8)
header_names = st.sampled_from(["Authorization", "Cookie", "X-Api-Key", "Accept", "X-A", "proxy-authorization"])
# The edges of the number line: every numeric field sometimes gets one.
EDGES = st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e300, -1, 0, 2**32, 2**64, 0.1, 1.0])


def number(common):
    return st.one_of(common, common, common, EDGES)


NEEDS = {"closed": ["clients"], "open": ["rate"], "users": ["users", "spawn_rate"]}
EXTRAS = {
    "closed": {
        "think_time_ms": st.integers(0, 100),
        "think": st.just({"fixed_ms": 5}),
        "stages": st.just([{"duration_s": 1, "target": 5}]),
    },
    "open": {
        "poisson": st.booleans(),
        "max_connections": number(st.integers(1, 100)),
        "stages": st.just([{"duration_s": 1.5, "target": 50.5}]),
    },
    "users": {"think": st.just({"uniform_ms": [1, 9]})},
}


@st.composite
def generated_plans(draw) -> bytes:
    """Plans shaped like real ones with drawn values, then 0-3 parts replaced by anything:
    both accepted plans (exercising the wire conversion) and near misses."""
    model = draw(st.sampled_from(["closed", "open", "users"]))
    load = {
        "model": model,
        **{
            k: draw(number(st.integers(1, 50) if k in ("clients", "users") else st.floats(0.5, 1e4)))
            for k in NEEDS[model]
        },
    }
    for key in draw(st.lists(st.sampled_from(sorted(EXTRAS[model])), max_size=2, unique=True)):
        load[key] = draw(EXTRAS[model][key])
    request = st.fixed_dictionaries(
        {"path": st.sampled_from(["/", "/a?b=1", "/%20"])},
        optional={
            "name": printable,
            "weight": number(st.integers(1, 9)),
            "headers": st.dictionaries(header_names, st.text(max_size=12), max_size=3),
            "method": st.sampled_from(["GET", "POST"]),
            "body": st.text(max_size=8),
        },
    )
    doc = {
        "targets": draw(
            st.lists(
                st.fixed_dictionaries(
                    {"url": st.sampled_from(["http://127.0.0.1:8080", "https://[::1]:1", "http://h.example"])},
                    optional={"weight": number(st.integers(1, 5))},
                ),
                min_size=1,
                max_size=3,
            )
        ),
        "workload": {"requests": draw(st.lists(request, min_size=1, max_size=3))},
        "load": load,
    }
    if draw(st.booleans()):
        doc["duration_s"] = draw(number(st.floats(0.5, 30)))
    else:
        load.pop({"closed": "clients", "open": "rate", "users": "users"}[model])
        doc["sweep"] = {
            "steps": draw(st.lists(number(st.integers(1, 50)), min_size=1, max_size=3)),
            "step_s": draw(number(st.integers(2, 20))),
        }
        if draw(st.booleans()):
            doc["sweep"]["repeat"] = draw(st.integers(1, 3))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, 3]))):
        where = doc
        for key in draw(st.lists(st.sampled_from(SCHEMA_KEYS), min_size=1, max_size=3)):
            if not isinstance(where.get(key), dict):
                where[key] = draw(values)
                break
            where = where[key]
    return yaml.safe_dump(doc, allow_unicode=draw(st.booleans())).encode("utf-8", "surrogatepass")


@st.composite
def mutated_plans(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        how = draw(st.sampled_from(["insert", "delete", "flip", "duplicate", "truncate"]))
        if how == "insert":
            data[at:at] = draw(st.one_of(st.sampled_from(TOKENS), st.binary(max_size=8)))
        elif how == "delete":
            del data[at : at + draw(st.integers(1, 40))]
        elif how == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "duplicate":
            piece = data[at : at + draw(st.integers(1, 200))]
            data[at:at] = piece * draw(st.integers(1, 5))
        else:
            del data[at:]
    return bytes(data)


WORKDIR = Path(tempfile.mkdtemp(prefix="loadfleet-plan-fuzz-"))


def validate(data: bytes) -> tuple[int, str]:
    """`loadfleet validate FILE` as its main() runs it: the exit code and stderr."""
    path = WORKDIR / "plan.yaml"
    path.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["validate", str(path)])
    return code, err.getvalue()


def check(data: bytes) -> None:
    started = time.process_time()
    code, err = validate(data)
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err
    assert time.process_time() - started < 1.0
    if code == 0:
        check_accepted(data)


def check_accepted(data: bytes) -> None:
    """An accepted plan reads back from its own YAML and fits the wire for its first and
    last steps (a confined parse: what the controller does with it)."""
    try:
        plan = parse_plan(data.decode("utf-8-sig"))
    except PlanError:
        return  # it named a file: valid where the plan is, refused where it is not
    assert parse_plan(plan.to_yaml()) == plan
    specs = expand(plan)
    for spec in {specs[0], specs[-1]}:
        step = step_plan(plan, spec)
        for share in split_over_engines(step.load, step.max_requests, [("a1", 3), ("a2", 1)]):
            assignment = JobAssignment(job_id="r/s", plan=step, engines=share.engines, start_at_ms=2**41)
            assert assignment_to_proto(assignment).SerializeToString()


FUZZ = settings(
    max_examples=examples(1200),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(generated_plans())
def test_generated_plans_exit_0_or_2(data):
    check(data)


@FUZZ
@given(mutated_plans())
def test_mutated_plans_exit_0_or_2(data):
    check(data)


@settings(FUZZ, max_examples=examples(400))
@given(st.binary(max_size=2000))
def test_random_bytes_exit_0_or_2(data):
    check(data)


# ---------------------------------------------------------------- recursive aliases in real plans

RECURSIVE_TAILS = ["a: &a [*a]\n", "x: &x [1, [2, *x]]\n", "agents2: &g {labels: {x: *g}}\n"]

# Validates each file named on the command line with cli.main, one JSON line per file.
_VALIDATE_EACH = """
import contextlib, io, json, sys
from loadfleet.controller import cli
for path in sys.argv[1:]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(["validate", path])
    print(json.dumps([path, code, err.getvalue()]), flush=True)
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.process
def test_every_seed_with_a_recursive_alias_is_refused_in_bounded_time_and_memory(tmp_path):
    """Each real plan with a recursive alias added: refused with the alias's place, all of
    them in one process of at most 1 GiB within 60 s (before: the first one never ended)."""
    paths = []
    for i, seed in enumerate(SEEDS):
        for j, tail in enumerate(RECURSIVE_TAILS):
            path = tmp_path / f"seed{i}-{j}.yaml"
            path.write_bytes(seed.rstrip(b"\n") + b"\n" + tail.encode())
            paths.append(path)
    try:
        result = subprocess.run(
            [sys.executable, "-c", _VALIDATE_EACH, *map(str, paths)],
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"still validating after 60 s: {(exc.stdout or b'')[-500:]!r}")
    assert result.returncode == 0, result.stderr[-2000:]
    outcomes = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(outcomes) == len(paths)
    for path, code, err in outcomes:
        assert code == 2 and "recursive alias" in err and "Traceback" not in err, (path, err)


# ---------------------------------------------------------------- workload manifests

JSON_EDGES = ["NaN", "Infinity", "-Infinity", "1e400", "-1", "0", "1e6", "1e7", "9" * 400, "true", "null", '"1"']
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20,
)
manifest_paths = st.one_of(
    st.sampled_from(["/dir0/a.html", "/", "/a b", "a.html", "/a\r\nHost: x", "/%20", "/" + "a" * 5000]),
    st.text(max_size=12),
)


@st.composite
def manifests(draw) -> bytes:
    """Manifests shaped like the lab's with drawn fields (numbers at the edges written as
    JSON text, so NaN and Infinity appear as json's constants), or any JSON value."""
    if draw(st.integers(0, 4)) == 0:
        return json.dumps(draw(json_values)).encode()
    entries = []
    for _ in range(draw(st.integers(0, 4))):
        weight = draw(st.one_of(st.sampled_from(JSON_EDGES), st.floats(0, 100).map(repr)))
        entry = {"path": draw(manifest_paths), "class": draw(st.one_of(st.just("class0"), st.text(max_size=8)))}
        for key in draw(st.lists(st.sampled_from(["path", "class"]), max_size=1)):
            entry[key] = draw(json_values)
        text = json.dumps(entry)[:-1] + f', "weight": {weight}, "bytes": 1}}'
        entries.append(draw(st.sampled_from([text, json.dumps(draw(json_values))])) if draw(st.booleans()) else text)
    return ('{"files": [' + ", ".join(entries) + "]}").encode()


MANIFEST_PLAN = b"""duration_s: 1
targets: [{url: "http://127.0.0.1:1"}]
workload: {manifest: manifest.json}
load: {model: closed, clients: 1}
"""


@settings(FUZZ, max_examples=examples(600))
@given(manifests())
def test_generated_manifests_exit_0_or_2_and_what_validate_accepts_the_controller_accepts(manifest):
    (WORKDIR / "manifest.json").write_bytes(manifest)
    started = time.process_time()
    code, err = validate(MANIFEST_PLAN)
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err
    assert time.process_time() - started < 1.0
    if code == 2:
        assert "workload.manifest: " in err, err
        return
    plan = load_plan(WORKDIR / "plan.yaml")
    assert parse_plan(plan.to_yaml()) == plan
