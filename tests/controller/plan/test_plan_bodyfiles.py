"""Request bodies from files (plan/bodyfiles.py): read where the plan is and sent inline, with
the bounds of an inline body; a controller never opens one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.plan.bodyfiles import MAX_BODY_FILE_BYTES
from loadfleet.controller.plan.parse import load_plan, parse_plan

PLAN = """
duration_s: 1
targets: [{url: "http://127.0.0.1:8080"}]
load: {model: closed, clients: 1}
workload:
  requests:
    - {name: order, method: POST, path: /orders, body_file: BODY, headers: {Content-Type: application/json}}
"""


def plan_with(tmp_path: Path, body_file: str, *, extra: str = "") -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN.replace("BODY", body_file).replace("body_file:", f"{extra}body_file:"))
    return path


def problems(plan: Path) -> list[str]:
    with pytest.raises(PlanError) as info:
        load_plan(plan)
    return [f"{p.path}: {p.message}" for p in info.value.problems]


def test_the_file_is_the_body_and_the_plan_sent_carries_it_inline(tmp_path):
    (tmp_path / "order.json").write_text('{"buyer": "user${user}", "note": "café"}\n')
    plan = load_plan(plan_with(tmp_path, "order.json"))
    assert plan.requests[0].body == '{"buyer": "user${user}", "note": "café"}\n'
    sent = plan.to_yaml()
    assert "body_file" not in sent
    assert parse_plan(sent) == plan  # what the controller receives: confined, self-contained


def test_a_controller_refuses_a_plan_that_names_a_body_file(tmp_path):
    with pytest.raises(PlanError) as info:
        parse_plan(PLAN.replace("BODY", "order.json"), base_dir=tmp_path)
    [problem] = info.value.problems
    assert problem.path == "workload.requests[0].body_file" and "reads no files named by a plan" in problem.message


def test_each_bad_body_file_is_named_by_its_path(tmp_path):
    (tmp_path / "big.json").write_bytes(b"x" * (MAX_BODY_FILE_BYTES + 1))
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "ok.json").write_text("{}")
    assert problems(plan_with(tmp_path, "big.json")) == [
        f"workload.requests[0].body_file: {tmp_path / 'big.json'}: larger than {MAX_BODY_FILE_BYTES:,} bytes"
    ]
    assert "is not UTF-8 text (byte 3)" in problems(plan_with(tmp_path, "latin1.txt"))[0]
    assert "a directory, not a regular file" in problems(plan_with(tmp_path, "dir"))[0]
    assert "not a regular file" in problems(plan_with(tmp_path, "pipe"))[0]  # never opened: no hang
    assert "No such file" in problems(plan_with(tmp_path, "missing.json"))[0]
    assert problems(plan_with(tmp_path, "ok.json", extra="body: '{}', ")) == [
        "workload.requests[0].body_file: give a `body` or a `body_file`, not both"
    ]
