"""Points and their InfluxDB line-protocol form."""

from __future__ import annotations

import math
from dataclasses import dataclass

# A point's field: its name and value.
Field = tuple[str, float | int | bool | str]


@dataclass(frozen=True)
class Point:
    measurement: str
    tags: tuple[tuple[str, str], ...]
    fields: tuple[Field, ...]
    time_ms: int

    def line(self) -> str:
        """Line protocol with millisecond precision. Left out, as InfluxDB refuses them (and
        with them the whole batch): empty tag values, and float fields that are no number
        (NaN, infinities: a figure that was not measured). "" when no field is left: a
        point without fields is no point."""
        tags = "".join(f",{_key(k)}={_key(v)}" for k, v in self.tags if v != "")
        fields = ",".join(f"{_key(k)}={_field(v)}" for k, v in self.fields if _written(v))
        if not fields:
            return ""
        return f"{_key(self.measurement)}{tags} {fields} {self.time_ms}"


def _written(value: object) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def _key(text: str) -> str:
    """A measurement, tag key or value, field key: escaped; a line break (which would end the
    line) becomes a space."""
    text = str(text).replace("\n", " ").replace("\r", " ")
    return text.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def _field(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i"
    if isinstance(value, float):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
