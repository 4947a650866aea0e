"""YAML from people we do not trust: PyYAML's safe loader behind limits that hold before
the document costs memory or time.

A plan reaches the controller from anyone who may start runs, and `loadfleet validate`
reads whatever file it is given. PyYAML's `safe_load` builds no Python objects, but it
still (a) recurses once per nesting level (5,000 levels end in RecursionError), (b) shares
aliased nodes, so a 500-byte "billion laughs" is cheap to load and stalls whatever walks
it next (the schema validator), (c) builds a self-referencing list or mapping from an
alias inside the node it names (`a: &a [*a]`: 11 bytes), which whatever walks it next
walks forever, (d) keeps the last of duplicate keys silently, (e) turns `.nan`, `.inf`
and `1e400` into floats that pass every `minimum` check, and (f) reads YAML 1.1's
implicit types (`010` is 8, `1:30` is 90, `no` is False).

So a document is checked in two passes:

1. bytes: size, encoding (UTF-8 only; a UTF-16 file or binary data is named as such),
   control characters;
2. events (the parser is iterative, so no recursion yet): nesting depth, alias count,
   recursive aliases (an alias to a node still open is refused, so what is built has no
   cycle), the size of the tree with every alias expanded (an alias counts the size of
   the node it names), duplicate and non-text keys; each with the document path and the
   line and column where it happens;

and only then composed and constructed by the safe loader (libyaml when present) with
the YAML 1.2 core schema (yamlcore.py), and walked once, within the same node budget,
for non-finite numbers. Every refusal is a `YamlProblem` with a path.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from loadfleet.controller.plan.yamlcore import CoreSchemaError, quote_core_forms, use_core_schema

# A resolved plan holds a manifest's requests inline (~30-100 bytes each; the lab's largest
# manifest has 144 files). The limits keep the worst case, a document right at them, below
# ~0.6 s of CPU on a slow core (docs/security.md): well inside the 3 s lease.
MAX_DOCUMENT_BYTES = 2**20
# Plans nest 6 levels; 32 leaves room and stays far from Python's recursion limit.
MAX_DEPTH = 32
# Anchors are allowed for the odd shared header block, not as a compression scheme.
MAX_ALIASES = 64
# Nodes of the document with every alias expanded (a scalar, a list, a mapping: 1 each):
# ~4,000 requests of a name, a path and a weight.
MAX_NODES = 30_000

_Parser: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # Any: a base class chosen at run time


class _Loader(_Parser):  # type: ignore[misc]  # PyYAML has no type information here
    """The safe loader, reading plain scalars by the YAML 1.2 core schema (yamlcore.py)."""


use_core_schema(_Loader)
_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)
# YAML allows tab, LF and CR among the C0 controls; everything else is binary or a trick.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class YamlProblem(Exception):
    """Why a document was refused, and where (`targets[0].url`, or "" for the whole)."""

    def __init__(self, path: str, message: str):
        super().__init__(path, message)
        self.path = path
        self.message = message

    def __str__(self) -> str:
        return f"{self.path or '<document>'}: {self.message}"


def decode(data: bytes) -> str:
    """The text of a YAML file: UTF-8 (a BOM is allowed), nothing else."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise YamlProblem("", f"{len(data):,} bytes is larger than the {MAX_DOCUMENT_BYTES:,} bytes a plan may have")
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise YamlProblem("", f"the file is {name} text; save it as UTF-8")
    if b"\x00" in data[:4096]:
        raise YamlProblem("", f"binary data (a NUL byte at offset {data.index(0)}), not YAML text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise YamlProblem(
            "",
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} is invalid (save the file as UTF-8)",
        ) from None


def load(text: str) -> Any:
    """The document in `text` as plain Python data (dicts, lists, str, int, float, bool,
    None, dates), or YamlProblem."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_DOCUMENT_BYTES:
        raise YamlProblem("", f"{size:,} bytes is larger than the {MAX_DOCUMENT_BYTES:,} bytes a plan may have")
    if match := _CONTROL.search(text):
        line, column = _position(text, match.start())
        raise YamlProblem(
            "",
            f"control character U+{ord(match.group()):04X} at line {line}, column {column} (binary data is not a plan)",
        )
    try:
        _scan(text)
        loader = _Loader(text)
        try:
            doc = loader.get_single_data()
        finally:
            loader.dispose()
    except CoreSchemaError as exc:
        raise YamlProblem("", f"{exc.problem}{_where(exc.problem_mark)}") from None
    except yaml.MarkedYAMLError as exc:
        raise _nesting_problem(text, exc) or YamlProblem(
            "", f"not valid YAML{_where(exc.problem_mark)}: {exc.problem}"
        ) from None
    except yaml.YAMLError as exc:
        raise YamlProblem("", f"not valid YAML: {exc}") from None
    except (ValueError, OverflowError, TypeError) as exc:
        if "digits" in str(exc):  # Python's int() refuses more than 4,300 digits
            raise YamlProblem("", "a number has thousands of digits") from None
        raise YamlProblem("", f"a value cannot be read: {exc}") from None
    _check_numbers(doc, "")
    return doc


def _nesting_problem(text: str, exc: yaml.MarkedYAMLError) -> YamlProblem | None:
    """Ours, when libyaml refused a nesting deeper than its own limit (1,000 levels, in
    PyYAML 6.0.4's wheels) before `_scan` saw our MAX_DEPTH: its scanner reads every opening
    bracket of a flow collection before the first event. The text up to where it stopped
    holds fewer levels than that limit and more than ours, so scanning it names the place."""
    mark = exc.problem_mark
    if "nesting depth" not in str(exc.problem) or mark is None:
        return None
    try:
        _scan(text[: mark.index])
    except YamlProblem as ours:
        return ours
    except yaml.YAMLError:  # the cut text is not valid YAML before it is too deep
        pass
    return None


def _where(mark: yaml.Mark | None) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def path_join(path: str, part: object) -> str:
    """`a.b[2].c`: the way plan problems name places."""
    if isinstance(part, int):
        return f"{path}[{part}]"
    return f"{path}.{part}" if path else str(part)


@dataclass
class _Frame:
    """An open mapping or sequence during the event scan."""

    path: str
    mapping: bool
    anchor: str | None
    size: int = 1
    index: int = 0
    key: str | None = None  # mappings: the key whose value comes next (None: a key comes next)
    keys: set[str] = field(default_factory=set)


@dataclass
class _Anchors:
    """The anchors seen so far: the expanded size of each closed one, and the names of
    those whose node is still open (an alias to one of those would be inside it)."""

    sizes: dict[str, int] = field(default_factory=dict)
    open: set[str] = field(default_factory=set)

    def define(self, event: yaml.NodeEvent, path: str) -> None:
        name = event.anchor
        if name in self.sizes or name in self.open:  # PyYAML's composer refuses it too
            raise YamlProblem(path, f"the anchor &{name} is defined twice{_where(event.start_mark)}")
        if isinstance(event, yaml.ScalarEvent):
            self.sizes[name] = 1
        else:
            self.open.add(name)

    def close(self, name: str, size: int) -> None:
        self.open.discard(name)
        self.sizes[name] = size

    def size_of(self, event: yaml.AliasEvent, path: str) -> int:
        """The expanded size of what alias `event` names."""
        name = event.anchor
        if name in self.open:
            raise YamlProblem(
                path,
                f"*{name}{_where(event.start_mark)} is inside &{name}, the node it names: "
                "a recursive alias (the value would contain itself)",
            )
        if name not in self.sizes:
            raise YamlProblem(path, f"*{name}{_where(event.start_mark)} names no anchor (&{name}) before it")
        return self.sizes[name]


def _scan(text: str) -> None:
    """Checks depth, aliases, expanded size and keys on the event stream (no recursion)."""
    scan = _Scan()
    for event in yaml.parse(text, Loader=_Parser):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            scan.start(event)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            scan.end()
        elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
            scan.leaf(event)
        if scan.total > MAX_NODES:
            raise _too_many(event.start_mark, aliases=scan.aliases > 0)


@dataclass
class _Scan:
    """The state of `_scan`: the open nodes, the anchors, and the aliases and values so far
    (`total` counts what aliases repeat)."""

    frames: list[_Frame] = field(default_factory=list)
    anchors: _Anchors = field(default_factory=_Anchors)
    aliases: int = 0
    total: int = 0

    def start(self, event: yaml.MappingStartEvent | yaml.SequenceStartEvent) -> None:
        """A mapping or a sequence opens."""
        path = _place(self.frames, event, is_scalar=False)
        if event.anchor:
            self.anchors.define(event, path)
        self.frames.append(_Frame(path, isinstance(event, yaml.MappingStartEvent), event.anchor))
        self.total += 1
        if len(self.frames) > MAX_DEPTH:
            raise YamlProblem(path, f"nested more than {MAX_DEPTH} levels deep{_where(event.start_mark)}")

    def end(self) -> None:
        """The innermost open mapping or sequence closes: its size goes to its anchor and parent."""
        done = self.frames.pop()
        if done.anchor:
            self.anchors.close(done.anchor, done.size)
        if self.frames:
            self.frames[-1].size += done.size

    def leaf(self, event: yaml.ScalarEvent | yaml.AliasEvent) -> None:
        """A scalar, or an alias (as big as what it names)."""
        path = _place(self.frames, event, is_scalar=isinstance(event, yaml.ScalarEvent))
        size = 1
        if isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise YamlProblem(path, f"more than {MAX_ALIASES} aliases (*name){_where(event.start_mark)}")
            size = self.anchors.size_of(event, path)
        elif event.anchor:
            self.anchors.define(event, path)
        self.total += size
        if self.frames:
            self.frames[-1].size += size


def _too_many(mark: yaml.Mark | None, *, aliases: bool) -> YamlProblem:
    how = " (aliases repeat what they name)" if aliases else ""
    return YamlProblem("", f"more than {MAX_NODES:,} values{how}{_where(mark)}")


def _place(frames: list[_Frame], event: yaml.NodeEvent, *, is_scalar: bool) -> str:
    """The path of the node `event` starts, updating its parent frame; keys are checked here."""
    if not frames:
        return ""
    parent = frames[-1]
    if not parent.mapping:
        parent.index += 1
        return path_join(parent.path, parent.index - 1)
    if parent.key is None:  # this node is a key
        if not is_scalar:
            raise YamlProblem(parent.path, f"a key must be plain text{_where(event.start_mark)}")
        key = event.value
        if key in parent.keys and key != "<<":
            raise YamlProblem(
                path_join(parent.path, key),
                f"duplicate key '{_short(key)}'{_where(event.start_mark)} (the first one would be lost)",
            )
        parent.keys.add(key)
        parent.key = key
        return path_join(parent.path, key)
    key, parent.key = parent.key, None
    return path_join(parent.path, key)


def _check_numbers(node: object, path: str) -> None:
    """NaN and infinities pass every `minimum` of a schema (comparisons with NaN are false):
    refuse them here. Keys must be text (YAML 1.2 still reads `1:` as 1, `true:` as True).
    The walk visits at most MAX_NODES values: `_scan` bounds the expanded tree and refuses
    cycles, and should a document ever get past it, this walk still ends."""
    stack = [(node, path)]
    visited = 0
    while stack:
        value, where = stack.pop()
        visited += 1
        if visited > MAX_NODES:
            raise _too_many(None, aliases=True)
        if isinstance(value, float) and not math.isfinite(value):
            raise YamlProblem(where, f"{value} is not a finite number")
        if isinstance(value, dict):
            for key, child in value.items():
                if not isinstance(key, str):
                    raise YamlProblem(path_join(where, str(key)), f"the key {key!r} must be text (quote it)")
                stack.append((child, path_join(where, key)))
        elif isinstance(value, list):
            stack.extend((child, path_join(where, i)) for i, child in enumerate(value))


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


_Emitter: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's: 3x faster for a resolved plan


class _NoAliasDumper(_Emitter):  # type: ignore[misc]  # PyYAML has no type information here
    """Writes every value in full: what we write must load back under MAX_ALIASES; and
    quotes text that either YAML 1.1 or 1.2 would read as another type."""

    def ignore_aliases(self, data: object) -> bool:
        return True


quote_core_forms(_NoAliasDumper)


def dump(doc: object) -> str:
    text: str = yaml.dump(doc, Dumper=_NoAliasDumper, sort_keys=False)
    return text
