"""Templates of a journey's requests (`${csrf}` in a path, a header value, a body), parsed as
the engine parses them, so `validate` refuses exactly what the engine would.

The grammar is the engine's (agent/engine/src/template.rs, its module comment), and both
sides test against one table, tests/wire/template_cases.json:

    template  := ( "$$" before "{" | "${" reference [ ":" filter ] "}" | any other byte )*
    reference := "user" | "agent" | "iteration" | "uuid" | "now_ms" | "random(" low "," high ")"
               | data "." column | variable
    filter    := "url" | "json"

In a run of `$`s just before a `{`, each `$$` is a literal `$` and an odd one left over opens
a `${`: `$${` is a literal `${`. A `${` ends at the first `}`. Offsets are in bytes of the
UTF-8 text, as the engine counts them. The controller never renders a template: the engine
does, per request; here a template is only parsed, to name what it reads.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

# A template's text is at most this many bytes (the engine's MAX_REQUEST_BYTES: a rendered
# request may be no longer).
MAX_TEMPLATE_BYTES = 64 * 1024

# The u64 range of random(low,high)'s numbers.
_MAX_U64 = 2**64 - 1
# What Rust's u64 parser takes: digits, a `+` before them allowed.
_WHOLE_NUMBER = re.compile(r"\+?[0-9]+")


class Builtin(enum.StrEnum):
    USER = "user"  # the user's fleet-wide index (JobSpec.first_user + the engine's own index)
    AGENT = "agent"
    ITERATION = "iteration"
    UUID = "uuid"
    NOW_MS = "now_ms"
    RANDOM = "random"


# Names a variable may not have: a built-in wins over a variable of its name in the engine.
BUILTIN_NAMES = frozenset(b.value for b in Builtin)


class Filter(enum.StrEnum):
    NONE = ""
    URL = "url"  # percent-encoding of all but RFC 3986's unreserved bytes
    JSON = "json"  # escaping for the inside of a JSON string


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class VarRef:
    name: str
    filter: Filter = Filter.NONE


@dataclass(frozen=True)
class ColumnRef:
    data: str
    column: str
    filter: Filter = Filter.NONE


@dataclass(frozen=True)
class BuiltinRef:
    builtin: Builtin
    filter: Filter = Filter.NONE
    low: int = 0  # random only: uniform over low..=high
    high: int = 0


Piece = Literal | VarRef | ColumnRef | BuiltinRef


@dataclass(frozen=True)
class TemplateNames:
    """What a template may name: variables, and data sets with their columns."""

    variables: frozenset[str] = frozenset()
    data: dict[str, tuple[str, ...]] = field(default_factory=dict)


class ErrorKind(enum.StrEnum):
    """Why a template was refused: the kinds' names of template_cases.json."""

    UNTERMINATED = "unterminated"
    EMPTY = "empty"
    UNKNOWN_VARIABLE = "unknown_variable"
    UNKNOWN_DATA = "unknown_data"
    UNKNOWN_COLUMN = "unknown_column"
    UNKNOWN_FILTER = "unknown_filter"
    BAD_RANDOM = "bad_random"
    TOO_LONG = "too_long"


_LITERAL_HINT = "(a literal `${` is written `$${`)"


class TemplateError(ValueError):
    """A refused template: `offset` is the byte where its `${` starts; `name` the name,
    data.column, filter or text of the unknown_* and bad_random kinds. Its message is the
    engine's words for the same refusal."""

    def __init__(self, kind: ErrorKind, offset: int, name: str = "") -> None:
        self.kind, self.offset, self.name = kind, offset, name
        super().__init__(_message(kind, offset, name))


def _message(kind: ErrorKind, at: int, name: str) -> str:
    return {
        ErrorKind.UNTERMINATED: f"`${{` at byte {at} is never closed by `}}` {_LITERAL_HINT}",
        ErrorKind.EMPTY: f"empty `${{}}` at byte {at}",
        ErrorKind.UNKNOWN_VARIABLE: f"unknown variable '{name}' at byte {at} {_LITERAL_HINT}",
        ErrorKind.UNKNOWN_DATA: f"unknown data set '{name}' at byte {at}",
        ErrorKind.UNKNOWN_COLUMN: f"unknown data column '{name}' at byte {at}",
        ErrorKind.UNKNOWN_FILTER: f"unknown filter ':{name}' at byte {at} (filters: url, json)",
        ErrorKind.BAD_RANDOM: f"'{name}' at byte {at}: random takes two whole numbers low <= high, as random(1,100)",
        ErrorKind.TOO_LONG: f"template of {name} bytes, over the {MAX_TEMPLATE_BYTES} a request may have",
    }[kind]


def parse_template(text: str, names: TemplateNames) -> list[Piece]:
    """The pieces of `text` in order (adjacent literal text joined), or TemplateError."""
    data = text.encode("utf-8", "surrogatepass")  # surrogatepass: any str is parsed, none raises
    if len(data) > MAX_TEMPLATE_BYTES:
        raise TemplateError(ErrorKind.TOO_LONG, MAX_TEMPLATE_BYTES, str(len(data)))
    pieces: list[Piece] = []
    literal = bytearray()
    i = 0
    while i < len(data):
        dollars = len(data[i:]) - len(data[i:].lstrip(b"$"))
        if dollars == 0 or data[i + dollars : i + dollars + 1] != b"{":
            plain = max(dollars, 1)  # plain bytes, and `$`s not before a `{`, are themselves
            literal += data[i : i + plain]
            i += plain
            continue
        literal += b"$" * (dollars // 2)  # before a `{`, each `$$` is one `$`
        opening = i + dollars - 1
        if dollars % 2 == 0:
            literal += b"{"
            i = opening + 2
            continue
        close = data.find(b"}", opening + 2)
        if close < 0:
            raise TemplateError(ErrorKind.UNTERMINATED, opening)
        piece = _value_piece(data[opening + 2 : close].decode("utf-8", "surrogatepass"), names, opening)
        if literal:
            pieces.append(Literal(literal.decode("utf-8", "surrogatepass")))
            literal = bytearray()
        pieces.append(piece)
        i = close + 1
    if literal:
        pieces.append(Literal(literal.decode("utf-8", "surrogatepass")))
    return pieces


def is_static(pieces: list[Piece]) -> bool:
    """Nothing to fill: the rendering is always the same text."""
    return all(isinstance(p, Literal) for p in pieces)


def variables_read(pieces: list[Piece]) -> list[str]:
    """The variables a template reads, in order, each once."""
    return list(dict.fromkeys(p.name for p in pieces if isinstance(p, VarRef)))


def _value_piece(expression: str, names: TemplateNames, at: int) -> Piece:
    reference, colon, filter_text = expression.partition(":")
    if colon and filter_text not in (Filter.URL, Filter.JSON):
        raise TemplateError(ErrorKind.UNKNOWN_FILTER, at, filter_text)
    if not reference:
        raise TemplateError(ErrorKind.EMPTY, at)
    filter_ = Filter(filter_text) if colon else Filter.NONE
    if reference in BUILTIN_NAMES and reference != Builtin.RANDOM:
        return BuiltinRef(Builtin(reference), filter_)
    if reference == Builtin.RANDOM or reference.startswith("random("):
        low, high = _random_bounds(reference, at)
        return BuiltinRef(Builtin.RANDOM, filter_, low, high)
    data_name, dot, column = reference.partition(".")
    if not dot:
        if reference not in names.variables:
            raise TemplateError(ErrorKind.UNKNOWN_VARIABLE, at, reference)
        return VarRef(reference, filter_)
    if data_name not in names.data:
        raise TemplateError(ErrorKind.UNKNOWN_DATA, at, data_name)
    if column not in names.data[data_name]:
        raise TemplateError(ErrorKind.UNKNOWN_COLUMN, at, reference)
    return ColumnRef(data_name, column, filter_)


def _random_bounds(reference: str, at: int) -> tuple[int, int]:
    bad = TemplateError(ErrorKind.BAD_RANDOM, at, reference)
    if not (reference.startswith("random(") and reference.endswith(")")):
        raise bad
    low_text, comma, high_text = reference[len("random(") : -1].partition(",")
    if not comma:
        raise bad
    bounds = [t.strip(" \t") for t in (low_text, high_text)]
    if not all(_WHOLE_NUMBER.fullmatch(t) for t in bounds):
        raise bad
    low, high = (int(t) for t in bounds)
    if high > _MAX_U64 or low > high:
        raise bad
    return low, high
