"""Frozen dataclasses to JSON documents and back, for the run's journal.

`to_doc` turns a dataclass (nested dataclasses, tuples, dicts, enums, StatsRows) into
plain JSON values; `from_doc` rebuilds it from its type hints. A StatsRow travels as its
protobuf encoding in base64, so histograms keep every count.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import functools
import types
import typing
from typing import Any

from loadfleet.v1 import stats_pb2
from loadfleet.wire.stats import StatsRow


def row_to_doc(row: StatsRow) -> str:
    return base64.b64encode(row.to_proto(buckets=True).SerializeToString()).decode()


def row_from_doc(doc: str) -> StatsRow:
    return StatsRow.from_proto(stats_pb2.IntervalStats.FromString(base64.b64decode(doc)))


# A field's metadata flag: left out of the document while it holds its default, so a record
# written before the field existed and one written after, without using it, are the same bytes
# (and read back alike: from_doc leaves a missing field to its default).
OMIT_DEFAULT = "journal_omit_default"


def to_doc(value: object) -> Any:
    """`value` as JSON values (dicts, lists, strings, numbers, booleans, None)."""
    if isinstance(value, StatsRow):
        return row_to_doc(value)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value):
        return {
            f.name: to_doc(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not (f.metadata.get(OMIT_DEFAULT) and getattr(value, f.name) == f.default)
        }
    if isinstance(value, (list, tuple)):
        return [to_doc(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_doc(v) for k, v in value.items()}
    return value


def from_doc(cls: Any, doc: Any) -> Any:
    """`doc` read back as `cls` (a type hint: a dataclass, tuple[X, ...], dict[str, X],
    X | None, an enum or a plain value)."""
    if doc is None:
        return None
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(cls) if a is not type(None)]
        return from_doc(inner[0], doc)
    if origin in (tuple, list):
        args = typing.get_args(cls)
        item = args[0] if args else object
        values = [from_doc(item, v) for v in doc]
        return tuple(values) if origin is tuple else values
    if origin is dict:
        key, item = typing.get_args(cls)
        return {from_doc(key, k): from_doc(item, v) for k, v in doc.items()}
    if cls is StatsRow:
        return row_from_doc(doc)
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return cls(doc)
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        hints = _hints(cls)
        return cls(**{f.name: from_doc(hints[f.name], doc[f.name]) for f in dataclasses.fields(cls) if f.name in doc})
    if cls is float:
        return float(doc)
    return doc


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)
