"""The controller's template parser against the engine's table (tests/wire/template_cases.json):
every case gives the same pieces or the same refusal as agent/engine/src/template.rs."""

import json
from pathlib import Path
from typing import Any

import pytest

from loadfleet.controller.plan.templates import (
    MAX_TEMPLATE_BYTES,
    BuiltinRef,
    ColumnRef,
    ErrorKind,
    Literal,
    Piece,
    TemplateError,
    TemplateNames,
    VarRef,
    is_static,
    parse_template,
    variables_read,
)

TABLE = json.loads((Path(__file__).parents[2] / "wire" / "template_cases.json").read_text())
NAMES = TemplateNames(
    variables=frozenset(TABLE["names"]["variables"]),
    data={d["name"]: tuple(d["columns"]) for d in TABLE["names"]["data"]},
)


def piece_doc(piece: Piece) -> dict[str, Any]:
    """A piece in the table's words."""
    if isinstance(piece, Literal):
        return {"literal": piece.text}
    if isinstance(piece, VarRef):
        doc: dict[str, Any] = {"var": piece.name}
    elif isinstance(piece, ColumnRef):
        doc = {"data": piece.data, "column": piece.column}
    else:
        doc = {"builtin": piece.builtin.value}
        if piece.builtin == "random":
            doc |= {"low": piece.low, "high": piece.high}
    if piece.filter:
        doc["filter"] = piece.filter.value
    return doc


@pytest.mark.parametrize("case", TABLE["cases"], ids=[c["template"] or "<empty>" for c in TABLE["cases"]])
def test_template_case(case):
    if "pieces" in case:
        assert [piece_doc(p) for p in parse_template(case["template"], NAMES)] == case["pieces"]
        return
    with pytest.raises(TemplateError) as caught:
        parse_template(case["template"], NAMES)
    expected = case["error"]
    assert (caught.value.kind.value, caught.value.offset) == (expected["kind"], expected["offset"])
    assert caught.value.name == expected.get("name", "")


def test_table_has_every_error_kind_but_too_long():
    """The table covers every refusal the parser has, the length bound apart (tested below)."""
    kinds = {c["error"]["kind"] for c in TABLE["cases"] if "error" in c}
    assert kinds == {k.value for k in ErrorKind} - {"too_long"}


def test_a_template_is_at_most_64_kib():
    exact = "a" * MAX_TEMPLATE_BYTES
    assert parse_template(exact, NAMES) == [Literal(exact)]
    with pytest.raises(TemplateError) as caught:
        parse_template(exact + "é", NAMES)  # bytes counted, not characters: é is two
    assert caught.value.kind is ErrorKind.TOO_LONG and caught.value.offset == MAX_TEMPLATE_BYTES
    assert f"{MAX_TEMPLATE_BYTES + 2} bytes" in str(caught.value)


def test_offsets_are_bytes():
    with pytest.raises(TemplateError) as caught:
        parse_template("é${nope}", NAMES)
    assert caught.value.offset == 2


@pytest.mark.parametrize(
    "text, words",
    [
        ("${nope}", "unknown variable 'nope' at byte 0 (a literal `${` is written `$${`)"),
        ("a ${csrf", "`${` at byte 2 is never closed by `}` (a literal `${` is written `$${`)"),
        ("${csrf:b64}", "unknown filter ':b64' at byte 0 (filters: url, json)"),
        ("${random(2,1)}", "'random(2,1)' at byte 0: random takes two whole numbers low <= high"),
    ],
)
def test_messages_are_the_engines(text, words):
    with pytest.raises(TemplateError, match=None) as caught:
        parse_template(text, NAMES)
    assert words in str(caught.value)


@pytest.mark.parametrize("text", ["${random(+1,5)}", "${random(\t1 ,5)}"])
def test_random_reads_numbers_as_rust_does(text):
    """u64's parser takes a leading + and the grammar blanks and tabs around a number."""
    [piece] = parse_template(text, NAMES)
    assert isinstance(piece, BuiltinRef) and (piece.low, piece.high) == (1, 5)


@pytest.mark.parametrize("text", ["${random(1_0,20)}", "${random(٣,5)}", "${random(1,5,6)}"])
def test_random_refuses_what_rust_refuses(text):
    with pytest.raises(TemplateError) as caught:
        parse_template(text, NAMES)
    assert caught.value.kind is ErrorKind.BAD_RANDOM


def test_variables_read_once_each_in_order():
    pieces = parse_template("${sid}/${csrf}/${sid}/${user}", NAMES)
    assert variables_read(pieces) == ["sid", "csrf"]
    assert not is_static(pieces)
    assert is_static(parse_template("price $${x}", NAMES))
