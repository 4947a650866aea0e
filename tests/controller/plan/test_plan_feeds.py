"""A plan's data file (docs/plans.md, "Test data"): CSV and JSON read where the plan is, sent
inline, read back equal by the controller, and every mistake named by its path."""

import json
import os
from pathlib import Path

import pytest

from loadfleet.controller.model.credentials import REDACTED
from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.plan.feeds import MAX_FEED_BYTES, MAX_FEED_ROWS, Feed, FeedMode, OnExhausted
from loadfleet.controller.plan.parse import load_plan, parse_plan
from loadfleet.controller.plan.redact import redact_plan_yaml

PLAN = """
name: feed
duration_s: 10
targets: [{url: "http://127.0.0.70:18801"}]
workload:
  feed: {name: accounts, file: FILE, mode: MODE}
  requests:
    - {name: login, method: POST, path: /login.php, body: "user=${accounts.user}&password=${accounts.password:url}"}
  session: {steps: [{request: login}]}
load: {model: closed, clients: 4}
"""


def plan_file(tmp_path: Path, data: str, *, name: str = "accounts.csv", mode: str = "unique", body: str = "") -> Path:
    (tmp_path / name).write_text(data)
    text = PLAN.replace("FILE", name).replace("MODE", mode)
    if body:
        text = text.replace("user=${accounts.user}&password=${accounts.password:url}", body)
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(PlanError) as caught:
        load_plan(path)
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


def test_a_csv_file_becomes_the_plans_rows_and_the_controller_reads_them_back_equal(tmp_path):
    plan = load_plan(plan_file(tmp_path, 'user,password\nuser0,pw0\n"user,1","p""w1"\n'))
    assert plan.feed == Feed(
        name="accounts",
        columns=("user", "password"),
        rows=(("user0", "pw0"), ("user,1", 'p"w1')),
        mode=FeedMode.UNIQUE,
        on_exhausted=OnExhausted.STOP_USER,
    )
    sent = plan.to_yaml()
    assert "accounts.csv" not in sent  # the controller gets the rows, never the file's name
    assert parse_plan(sent).feed == plan.feed


def test_a_json_array_of_objects_gives_columns_from_its_keys(tmp_path):
    rows = [{"user": "a", "password": 1}, {"user": "b", "password": True}]
    plan = load_plan(plan_file(tmp_path, json.dumps(rows), name="accounts.json", mode="circular"))
    assert plan.feed is not None
    assert (plan.feed.columns, plan.feed.rows, plan.feed.mode) == (
        ("user", "password"),
        (("a", "1"), ("b", "true")),
        FeedMode.CIRCULAR,
    )


@pytest.mark.parametrize(
    ("data", "name", "expected"),
    [
        ("user,password\n", "accounts.csv", "workload.feed.file: no rows: a feed needs at least one"),
        ("", "accounts.csv", "is empty: its first row names the columns"),
        ("user,password\na\n", "accounts.csv", "workload.feed.file: row 1: 1 cells for 2 columns"),
        ("user,user\na,b\n", "accounts.csv", "workload.feed.columns: 'user' names two columns"),
        ("user name,password\na,b\n", "accounts.csv", "workload.feed.columns: 'user name' is not a column name"),
        ('user,password\n"a\nb",c\n', "accounts.csv", "row 1: cell 1 holds a control character"),
        ('[{"user": "a", "password": "b"}, {"user": "c"}]', "accounts.json", "[1] has the keys ['user']"),
        ('{"user": "a"}', "accounts.json", "is not a JSON array of objects"),
        ('[{"user": "a", "password": [1]}]', "accounts.json", "[0].password: a cell is text, a number or a boolean"),
    ],
)
def test_a_file_that_cannot_be_rows_is_refused_with_its_path(tmp_path, data, name, expected):
    found = problems(plan_file(tmp_path, data, name=name))
    assert any(expected in p for p in found), found


def test_a_column_a_template_reads_but_the_file_lacks_is_named_with_the_files_columns(tmp_path):
    found = problems(plan_file(tmp_path, "user,pw\na,b\n"))
    assert found == [
        "workload.requests[0].body: unknown data column 'accounts.password' at byte 31 "
        "(the plan's data, workload.feed: accounts: user, pw)"
    ]
    found = problems(plan_file(tmp_path, "user,password\na,b\n", body="user=${people.user}"))
    assert found[0].startswith("workload.requests[0].body: unknown data set 'people' at byte 5")


def test_a_file_over_the_bound_or_not_regular_is_refused(tmp_path):
    big = "user,password\n" + "u,p\n" * (MAX_FEED_BYTES // 4)
    assert problems(plan_file(tmp_path, big)) == [
        f"workload.feed.file: {tmp_path / 'accounts.csv'}: larger than {MAX_FEED_BYTES:,} bytes"
    ]
    path = plan_file(tmp_path, "x")
    (tmp_path / "accounts.csv").unlink()
    os.mkfifo(tmp_path / "accounts.csv")  # a FIFO would block a reader forever
    assert problems(path) == [
        f"workload.feed.file: {tmp_path / 'accounts.csv'}: a FIFO (named pipe), not a regular file"
    ]
    (tmp_path / "accounts.csv").unlink()
    assert "No such file" in problems(path)[0]


def test_more_rows_than_the_bound_are_refused(tmp_path):
    many = "u\n" + "a\n" * (MAX_FEED_ROWS + 1)
    found = problems(plan_file(tmp_path, many, body="user=${accounts.u}"))
    assert found == [f"workload.feed.file: {MAX_FEED_ROWS + 1:,} rows, over the {MAX_FEED_ROWS:,} a feed may have"]


def test_the_controller_reads_no_file_a_plan_names(tmp_path):
    text = plan_file(tmp_path, "user,password\na,b\n").read_text()
    with pytest.raises(PlanError) as caught:
        parse_plan(text)
    [problem] = caught.value.problems
    assert problem.path == "workload.feed.file" and "reads no files named by a plan" in problem.message


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (("name: feed", "name: feed\ndriver: gatling"), "workload.feed", "gatling driver does not read data"),
        (("load: {model: closed, clients: 4}", "load: {model: open, rate: 5}"), "workload.feed", "no users"),
        (("mode: unique}", "mode: random, on_exhausted: wrap}"), "workload.feed.on_exhausted", "a random feed takes"),
        (
            ("duration_s: 10", "sweep: {step_s: 5, steps: [2, 4]}"),
            "workload.feed.mode",
            "a sweep would use them again",
        ),
    ],
)
def test_where_rows_cannot_be_taken_the_plan_is_refused(tmp_path, change, path, words):
    plan = plan_file(tmp_path, "user,password\na,b\n")
    text = plan.read_text().replace(*change)
    if "sweep" in change[1]:
        text = text.replace("clients: 4", "")
    if "open" in change[1]:
        text = text.replace("  session: {steps: [{request: login}]}\n", "")
    plan.write_text(text)
    found = problems(plan)
    assert any(p.startswith(f"{path}:") and words in p for p in found), found


def test_the_run_directorys_plan_keeps_no_credential_column_and_reads_back(tmp_path):
    plan = load_plan(plan_file(tmp_path, "user,password\nuser0,pw0\nuser1,pw1\n"))
    stored = redact_plan_yaml(plan.to_yaml())
    assert "pw0" not in stored and "user1" in stored
    assert parse_plan(stored).feed.rows == (("user0", REDACTED), ("user1", REDACTED))
    free = load_plan(plan_file(tmp_path, "user,item\nuser0,7\n", body="user=${accounts.user}&item=${accounts.item}"))
    assert redact_plan_yaml(free.to_yaml()) == free.to_yaml()  # no credential column: as it was
