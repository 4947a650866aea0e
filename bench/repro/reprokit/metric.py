"""The metric expressions of findings.yaml (its header defines the vocabulary), parsed into a
small syntax tree that `evaluate` walks. Parsing knows nothing of runs.

    expr     := arith ('@' 'each' NAME)*     (the last `each` outermost)
    arith    := term (('*' | '/') term)*
    term     := NUMBER | NAME '(' args ')' | NAME '[' sel (',' sel)* ']' | NAME
    args     := arg (',' arg)*          arg := NAME '=' (NAME | NUMBER '->' NUMBER) | arith
    sel      := NAME ('=' | '<' | '>') atom ['..' atom]        atom := NUMBER | NAME
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FUNCTIONS = frozenset({"ratio", "reduction", "diff", "growth", "slope", "onset", "max", "mean", "argmin", "argmax"})

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<number>\d+(?:\.\d+)?(?![A-Za-z]))
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:[-.][A-Za-z0-9_]+)*)
  | (?P<op>->|\.\.|[\[\](),=<>*/@]))""",
    re.VERBOSE,
)


class MetricSyntaxError(ValueError):
    """A metric that does not follow the grammar; the message says where."""


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class VarRef:
    """A bare variable, e.g. `cpus` in `max_ok_rps[server=apache]/cpus`: the cell's own value."""

    name: str


@dataclass(frozen=True)
class Sel:
    """One selector of a figure: `var op low` or `var = low..high`; low/high are str or float;
    `max`/`min` as a value are the largest/smallest level run."""

    var: str
    op: str
    low: object
    high: object = None

    def text(self) -> str:
        value = _fmt(self.low) + ("" if self.high is None else ".." + _fmt(self.high))
        return f"{self.var}{self.op}{value}"


@dataclass(frozen=True)
class Fig:
    name: str
    sels: tuple[Sel, ...]

    def text(self) -> str:
        return f"{self.name}[{','.join(s.text() for s in self.sels)}]"


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple
    kwargs: tuple[tuple[str, object], ...]  # over=var, or var=(from, to) for growth


@dataclass(frozen=True)
class BinOp:
    op: str
    left: object
    right: object


@dataclass(frozen=True)
class Each:
    """`body @ each var`: the comparison must hold at every level of var."""

    body: object
    var: str


def _fmt(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def tokenize(text: str) -> list[tuple[str, object]]:
    tokens, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise MetricSyntaxError(f"cannot read {text[pos : pos + 20]!r} at {pos}")
        kind = match.lastgroup
        value = match.group(kind)
        tokens.append((kind, float(value) if kind == "number" else value))
        pos = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0

    def peek(self, offset: int = 0):
        index = self.pos + offset
        return self.tokens[index] if index < len(self.tokens) else ("end", None)

    def take(self, kind: str | None = None, value=None):
        token = self.peek()
        if (kind and token[0] != kind) or (value is not None and token[1] != value):
            want = value if value is not None else kind
            raise MetricSyntaxError(f"expected {want!r}, found {token[1]!r} in {self.text!r}")
        self.pos += 1
        return token[1]

    def at(self, value) -> bool:
        return self.peek()[0] == "op" and self.peek()[1] == value

    def expr(self):
        body = self.arith()
        while self.at("@"):
            self.take("op", "@")
            if self.take("name") != "each":
                raise MetricSyntaxError(f"expected 'each' after '@' in {self.text!r}")
            body = Each(body, self.take("name"))
        if self.peek()[0] != "end":
            raise MetricSyntaxError(f"unexpected {self.peek()[1]!r} in {self.text!r}")
        return body

    def arith(self):
        node = self.term()
        while self.at("*") or self.at("/"):
            op = self.take("op")
            node = BinOp(op, node, self.term())
        return node

    def term(self):
        kind, value = self.peek()
        if kind == "number":
            self.pos += 1
            return Num(value)
        name = self.take("name")
        if self.at("("):
            return self.call(name)
        if self.at("["):
            return self.figure(name)
        return VarRef(name)

    def call(self, fn: str):
        if fn not in FUNCTIONS:
            raise MetricSyntaxError(f"unknown function {fn!r} in {self.text!r}")
        self.take("op", "(")
        args, kwargs = [], []
        while True:
            if self.peek()[0] == "name" and self.peek(1) == ("op", "="):
                key = self.take("name")
                self.take("op", "=")
                if self.peek()[0] == "number":
                    start = self.take("number")
                    self.take("op", "->")
                    kwargs.append((key, (start, self.take("number"))))
                else:
                    kwargs.append((key, self.take("name")))
            else:
                args.append(self.arith())
            if self.at(")"):
                self.take("op", ")")
                return Call(fn, tuple(args), tuple(kwargs))
            self.take("op", ",")

    def figure(self, name: str):
        self.take("op", "[")
        sels = []
        while True:
            var = self.take("name")
            op = self.take("op")
            if op not in ("=", "<", ">"):
                raise MetricSyntaxError(f"selector {var} takes =, < or >, not {op!r}")
            low, high = self.atom(), None
            if self.at(".."):
                self.take("op", "..")
                high = self.atom()
            sels.append(Sel(var, op, low, high))
            if self.at("]"):
                self.take("op", "]")
                return Fig(name, tuple(sels))
            self.take("op", ",")

    def atom(self):
        kind, value = self.peek()
        if kind not in ("number", "name"):
            raise MetricSyntaxError(f"expected a value, found {value!r} in {self.text!r}")
        self.pos += 1
        return value


def parse_metric(text: str):
    """The syntax tree of a metric expression; MetricSyntaxError if it does not parse."""
    return _Parser(text).expr()
