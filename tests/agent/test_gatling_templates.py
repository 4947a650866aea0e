"""JobSimulation's templates (agent/gatling Template.java) parse as the engine's do: the shared
case table tests/wire/template_cases.json, run through agent/gatling/src/test/java's TemplateCases
on the built classes (`make gatling`), compared case by case. Data sets are not in jobs yet, so a
`${data.column}` the table accepts is refused by JobSimulation as an unknown data set."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from loadfleet.agent.gatling import find_gatling

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "tests" / "wire" / "template_cases.json"
CASES = json.loads(TABLE.read_text())["cases"]
HARNESS = ROOT / "agent" / "gatling" / "src" / "test" / "java" / "loadfleet" / "gatling" / "TemplateCases.java"


@pytest.fixture(scope="module")
def parsed(tmp_path_factory) -> list[dict]:
    install = find_gatling()
    classes = tmp_path_factory.mktemp("template-cases")
    javac = str(Path(install.java).resolve().with_name("javac"))
    subprocess.run([javac, "-d", str(classes), "-cp", install.classpath, str(HARNESS)], check=True, timeout=120)
    classpath = f"{classes}:{install.classpath}"
    done = subprocess.run(
        [install.java, "-cp", classpath, "loadfleet.gatling.TemplateCases", str(TABLE)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    results: list[dict] = json.loads(done.stdout)
    assert len(results) == len(CASES)
    return results


def expected(case: dict) -> dict:
    """The table's answer, but for data sets, which a job does not have yet."""
    data = [p for p in case.get("pieces", []) if "data" in p]
    if data:
        return {"error": {"kind": "unknown_data", "offset": case["template"].index("${"), "name": data[0]["data"]}}
    if case.get("error", {}).get("kind") == "unknown_column":
        name = case["error"]["name"].split(".")[0]
        return {"error": {**case["error"], "kind": "unknown_data", "name": name}}
    return {k: case[k] for k in ("pieces", "error") if k in case}


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["template"] or "empty" for c in CASES])
def test_jobsimulation_parses_each_template_as_the_engine(parsed, index):
    assert parsed[index] == expected(CASES[index]), CASES[index]
