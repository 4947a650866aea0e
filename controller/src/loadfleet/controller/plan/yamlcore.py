"""Plain scalars read by the YAML 1.2 core schema, not PyYAML's YAML 1.1.

PyYAML implements YAML 1.1, whose implicit types surprise in a plan: `clients: 010` is 8
(octal), `duration_s: 1:30` is 90 (base 60), `1_000` is 1000, `0b11` is 3, `yes`, `no`, `on`,
`off`, `y` and `n` are booleans (so `labels: {zone: no}` is False), and `2026-01-01` a date.
YAML 1.2 (2009, and what JSON, our published JSON Schema and most other readers agree with)
reads them otherwise, and plans are read as YAML 1.2:

| text | YAML 1.1 | here (YAML 1.2 core) |
|---|---|---|
| `010` | 8 | 10: a decimal number with a leading zero |
| `0o10`, `0x10` | a string, 16 | 8, 16 |
| `1:30`, `1_000`, `0b11` | 90, 1000, 3 | text, which a numeric field refuses with its path |
| `yes`, `no`, `on`, `off` | booleans | text (`true` and `false` are the booleans) |
| `1e3` | a string | 1000.0 |
| `2026-01-01` | a date | text |

Why read 1.2 rather than refuse the forms on which the two disagree: 1.2 is the current
specification, its reading of each form is the one a person writing a number means (nobody
writes `010` clients meaning 8, or a 1:30 duration in a field documented in seconds), and the
forms 1.2 reads as text end in a schema problem with the field's path anyway
(planschema.py adds a hint naming the number to write).

`<<` merge keys are kept (a YAML 1.1 type, but schema-independent in practice and handy for
a shared header block); they are aliases and count against yamlsafe's budget.
"""

from __future__ import annotations

import re

import yaml

# No wire field holds a number this long; longer ones are refused before Python converts
# them (int() of thousands of decimal digits is slow, and raises past 4,300).
MAX_NUMBER_CHARS = 64

_NULL = re.compile(r"^(?:~|null|Null|NULL|)\Z")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)\Z")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\Z"
)
_MERGE = re.compile(r"^<<\Z")

# tag, pattern, the first characters it can start with ("" for the empty scalar)
_RESOLVERS = (
    ("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", _BOOL, list("tTfF")),
    ("tag:yaml.org,2002:int", _INT, list("-+0123456789")),
    ("tag:yaml.org,2002:float", _FLOAT, list("-+.0123456789")),
    ("tag:yaml.org,2002:merge", _MERGE, ["<"]),
)


class CoreSchemaError(yaml.constructor.ConstructorError):  # type: ignore[misc]  # PyYAML: no type information
    """A scalar tagged as a type (`!!int 1:30`) whose text is not of that type in YAML 1.2."""


def use_core_schema(loader: type) -> None:
    """Makes `loader` (a PyYAML loader class of our own) resolve and build plain scalars
    by the YAML 1.2 core schema only: none of YAML 1.1's implicit types remain."""
    loader.yaml_implicit_resolvers = {}  # type: ignore[attr-defined]  # the class's own, emptied
    for tag, pattern, first in _RESOLVERS:
        loader.add_implicit_resolver(tag, pattern, first)  # type: ignore[attr-defined]
    loader.add_constructor("tag:yaml.org,2002:int", _construct_int)  # type: ignore[attr-defined]
    loader.add_constructor("tag:yaml.org,2002:float", _construct_float)  # type: ignore[attr-defined]
    loader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)  # type: ignore[attr-defined]


def quote_core_forms(dumper: type) -> None:
    """Makes `dumper` quote every string that YAML 1.2 reads as another type, as well as
    those YAML 1.1 does (its own): a request named `0o10` or `1e3` is written '0o10' and
    reads back as text by either."""
    for tag, pattern, first in _RESOLVERS:
        dumper.add_implicit_resolver(tag, pattern, first)  # type: ignore[attr-defined]


def _text(node: yaml.ScalarNode) -> str:
    value: str = node.value
    if len(value) > MAX_NUMBER_CHARS:
        raise CoreSchemaError(
            None, None, f"a number of {len(value):,} digits (no field holds one that long)", node.start_mark
        )
    return value


def _construct_int(loader: object, node: yaml.ScalarNode) -> int:
    value = _text(node)
    if not _INT.match(value):
        raise CoreSchemaError(None, None, f"{value!r} is not an integer (write 10, 0o12 or 0xa)", node.start_mark)
    if value.startswith("0o"):
        return int(value[2:], 8)
    if value.startswith("0x"):
        return int(value[2:], 16)
    return int(value, 10)


def _construct_float(loader: object, node: yaml.ScalarNode) -> float:
    value = _text(node)
    if not (_FLOAT.match(value) or _INT.match(value)):
        raise CoreSchemaError(None, None, f"{value!r} is not a number", node.start_mark)
    special = value.lstrip("+-").lower()
    if special in (".inf", ".nan"):
        number = float(special[1:])
        return -number if value.startswith("-") else number
    return float(_construct_int(loader, node) if _INT.match(value) else value)


def _construct_bool(loader: object, node: yaml.ScalarNode) -> bool:
    value: str = node.value
    if not _BOOL.match(value):
        raise CoreSchemaError(None, None, f"{value[:40]!r} is not a boolean (write true or false)", node.start_mark)
    return value.lower() == "true"


# Text that might be one of YAML 1.1's numbers or booleans (`1:30`, `1_000`, `0b11`, `yes`).
_YAML11_CANDIDATE = re.compile(r"^[-+0-9A-Za-z._:]{1,32}\Z")
_Yaml11Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def yaml11_hint(value: object) -> str:
    """For text in a field that wants a number or a boolean: what to write, when YAML 1.1
    (PyYAML's own reading, and many other readers') would have read it as one; else ""."""
    if not isinstance(value, str) or not _YAML11_CANDIDATE.match(value):
        return ""
    try:
        old = yaml.load(value, Loader=_Yaml11Loader)  # a safe loader, 32 characters
    except yaml.YAMLError:
        return ""
    if isinstance(old, bool):
        write = "true" if old else "false"
    elif isinstance(old, (int, float)):
        write = repr(old)
    else:
        return ""
    return f" (plans are YAML 1.2, where {value} is text: write {write})"
