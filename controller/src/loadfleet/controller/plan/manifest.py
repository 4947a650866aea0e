"""The files a plan names (a workload manifest), read on the machine that has them with the
bounds of a plan itself: the manifest comes with the plan, from whoever wrote it.

- a regular file of at most `yamlsafe.MAX_DOCUMENT_BYTES` (a plan's own size: the manifest's
  requests travel inline in the plan), read by `loadfleet.wire.files.read_regular` (never a
  FIFO or a device, never more than that and one byte);
- UTF-8 JSON nested at most `yamlsafe.MAX_DEPTH` levels (json recurses once per level),
  checked before json builds anything; numbers finite and short (no NaN, Infinity, 1e400 or
  5,000-digit integers: the hooks of `json.loads` see each one as text first);
- at most as many files as a plan may have requests, each with a text `path` and `class`
  and a finite `weight` whose request weight fits the schema.

Every problem is a message for the plan's `workload.manifest`, never an exception of json or
the OS. What the controller would make of the requests (their paths and names against the
schema, the size of the plan that carries them) is checked on the resolved plan by the
controller's own function (plan.py, `_check_as_sent`).
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

from loadfleet.controller.plan import yamlsafe
from loadfleet.controller.plan.schema import plan_schema
from loadfleet.controller.plan.yamlcore import MAX_NUMBER_CHARS
from loadfleet.wire.files import FileRefused, read_regular

# Manifest weights are any non-negative numbers (the lab writes each file's fraction of all
# requests, e.g. 0.01 / 36); requests carry integer weights in the same proportions. A weight
# is read back as the nearest fraction with a denominator up to this: a float written from a
# fraction like 1/3600 is that fraction again (another one that near has a denominator past
# a million).
MAX_WEIGHT_DENOMINATOR = 10**6
# The problems of one manifest listed before the rest are summed up.
MAX_MANIFEST_PROBLEMS = 20


class FileProblems(Exception):
    """Why a file a plan names cannot be used: one message per problem."""

    def __init__(self, messages: list[str]):
        super().__init__(messages)
        self.messages = messages


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """The requests of a workload tree manifest, one per file, named by its size class, as
    plan request documents ({"name", "path", "weight"}); or FileProblems.

    Format (written by loadfleet.targets): {"files": [{"path": "/class0/f.html",
    "class": "class0", "weight": 0.0097, "bytes": 812, ...}, ...]}; a file is requested in
    proportion to its weight, exactly (integer_weights).
    """
    try:
        data = read_regular(path, yamlsafe.MAX_DOCUMENT_BYTES)
    except FileRefused as exc:
        raise FileProblems([f"{path}: {exc}"]) from None
    doc = _parse_json(data, path)
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list):
        raise FileProblems([f'{path} is not a workload manifest (a JSON object with a list of "files")'])
    if not files:
        raise FileProblems([f"{path} lists no files"])
    if len(files) > _MAX_REQUESTS:
        raise FileProblems([f"{path} lists {len(files):,} files; a plan holds at most {_MAX_REQUESTS:,} requests"])
    problems: list[str] = []
    for i, entry in enumerate(files):
        problems += [f"files[{i}]{p}" for p in _entry_problems(entry)]
    if len(problems) > MAX_MANIFEST_PROBLEMS:
        problems[MAX_MANIFEST_PROBLEMS:] = [f"... and {len(problems) - MAX_MANIFEST_PROBLEMS:,} more problems"]
    if problems:
        raise FileProblems(problems)
    weights = integer_weights([entry["weight"] for entry in files])
    if not any(weights):
        raise FileProblems([f"{path}: every file has weight 0; at least one must be requested"])
    return [
        {"name": entry["class"], "path": entry["path"], "weight": weight}
        for entry, weight in zip(files, weights, strict=True)
    ]


def integer_weights(weights: list[float]) -> list[int]:
    """Integer weights in exactly the proportions of `weights` (each read as a fraction, see
    MAX_WEIGHT_DENOMINATOR): scaled by their denominators' least common multiple, divided by
    the numerators' greatest common divisor. When that would pass a request weight's bound,
    the largest weight becomes the bound and the others their share of it, rounded (within
    half a unit in a billion of the largest; a weight above 0 stays at least 1)."""
    fractions = [Fraction(w).limit_denominator(MAX_WEIGHT_DENOMINATOR) for w in weights]
    scale = math.lcm(*(f.denominator for f in fractions))
    exact = [int(f * scale) for f in fractions]
    divisor = math.gcd(*exact) or 1
    exact = [e // divisor for e in exact]
    if max(exact) <= _MAX_REQUEST_WEIGHT:
        return exact
    largest = max(fractions)
    return [max(1, round(f / largest * _MAX_REQUEST_WEIGHT)) if f else 0 for f in fractions]


def _request_schema() -> dict[str, Any]:
    schema: dict[str, Any] = plan_schema()["properties"]["workload"]["properties"]["requests"]
    return schema


# The schema's bounds on requests, so a manifest is refused where an inline list would be.
_MAX_REQUESTS: int = _request_schema()["maxItems"]
_MAX_REQUEST_WEIGHT: int = _request_schema()["items"]["properties"]["weight"]["maximum"]


def _entry_problems(entry: object) -> list[str]:
    """`.path: ...` for each field of a manifest entry that cannot become a request."""
    if not isinstance(entry, dict):
        return [": an entry is an object with a path, a class and a weight"]
    problems = [
        f".{key}: {_not_text(entry.get(key))}" for key in ("path", "class") if not isinstance(entry.get(key), str)
    ]
    weight = entry.get("weight")
    if isinstance(weight, _Unreadable):
        problems.append(f".weight: {weight}")
    elif isinstance(weight, bool) or not isinstance(weight, (int, float)):
        problems.append(f".weight: a number (its share of the requests), not {_kind(weight)}")
    elif not 0 <= weight <= _MAX_REQUEST_WEIGHT:
        problems.append(f".weight: {weight!r} is not between 0 and {_MAX_REQUEST_WEIGHT:,}")
    return problems


def _not_text(value: object) -> str:
    return "missing" if value is None else f"must be text, not {_kind(value)}"


def _kind(value: object) -> str:
    if isinstance(value, _Unreadable):
        return str(value)
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


class _Unreadable:
    """A number json saw that no field may hold (NaN, Infinity, 1e400, 5,000 digits): kept
    as its reason, so the entry that has it says so with its place."""

    def __init__(self, reason: str):
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


def _finite_float(text: str) -> float | _Unreadable:
    if len(text) > MAX_NUMBER_CHARS:
        return _Unreadable(f"a number of {len(text):,} digits")
    value = float(text)
    return value if math.isfinite(value) else _Unreadable(f"{text} is not a finite number")


def _short_int(text: str) -> int | _Unreadable:
    return _Unreadable(f"a number of {len(text):,} digits") if len(text) > MAX_NUMBER_CHARS else int(text)


def _no_constant(text: str) -> _Unreadable:
    return _Unreadable(f"{text} is not a finite number")


def _parse_json(data: bytes, path: Path) -> Any:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileProblems([f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"]) from None
    if _nested_deeper_than(text, yamlsafe.MAX_DEPTH):
        raise FileProblems([f"{path} is nested more than {yamlsafe.MAX_DEPTH} levels deep"])
    try:
        return json.loads(text, parse_float=_finite_float, parse_int=_short_int, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise FileProblems([f"{path} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"]) from None


_STRUCTURE = re.compile(r'["\[\]{}]')


def _nested_deeper_than(text: str, limit: int) -> bool:
    """Whether the JSON `text` opens more than `limit` arrays or objects inside each other,
    found without recursion (strings skipped with json's own scanner, in linear time)."""
    depth, position = 0, 0
    while match := _STRUCTURE.search(text, position):
        position = match.end()
        char = match.group()
        if char == '"':
            try:
                _, position = json.decoder.scanstring(text, position)  # type: ignore[attr-defined]
            except ValueError:  # an unterminated or invalid string: json.loads says where
                return False
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False
