"""Points and their InfluxDB line-protocol form."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    measurement: str
    tags: tuple[tuple[str, str], ...]
    fields: tuple[tuple[str, float | int | bool | str], ...]
    time_ms: int

    def line(self) -> str:
        """Line protocol with millisecond precision; empty tag values are left out
        (InfluxDB rejects them)."""
        tags = "".join(f",{_key(k)}={_key(v)}" for k, v in self.tags if v != "")
        fields = ",".join(f"{_key(k)}={_field(v)}" for k, v in self.fields)
        return f"{_key(self.measurement)}{tags} {fields} {self.time_ms}"


def _key(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def _field(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i"
    if isinstance(value, float):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
