"""systemd unit files and environment files read the way systemd reads them, as far as the
shipped units use it: sections of `Key=value` lines (a key may repeat; a trailing backslash
continues a line), `%S` (the state directory root), and in command lines `${VAR}` (one word,
as is) and `$VAR` as a word of its own (split at whitespace, so an empty one is no word)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

_BRACED = re.compile(r"\$\{(\w+)\}")
_BARE_WORD = re.compile(r"^\$(\w+)$")


@dataclass(frozen=True)
class Unit:
    sections: dict[str, dict[str, list[str]]]

    def values(self, section: str, key: str) -> list[str]:
        return self.sections.get(section, {}).get(key, [])

    def value(self, section: str, key: str) -> str:
        """The last assignment, as systemd keeps for single-valued settings."""
        found = self.values(section, key)
        assert found, f"[{section}] has no {key}="
        return found[-1]


def read_unit(path: Path) -> Unit:
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for raw in path.read_text().splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None and "=" in line, f"{path}: not a setting: {line!r}"
        key, value = line.split("=", 1)
        current.setdefault(key.strip(), []).append(value.strip())
    return Unit(sections)


def read_environment_file(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, value = line.split("=", 1)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def command_line(unit: Unit, key: str, env: dict[str, str], state_dir: Path) -> list[str]:
    """The argv of `key` (e.g. ExecStart) as systemd would run it with `env`."""
    words = []
    for word in shlex.split(unit.value("Service", key).replace("%S", str(state_dir))):
        bare = _BARE_WORD.match(word)
        if bare:
            words.extend(env.get(bare.group(1), "").split())
        else:
            words.append(_BRACED.sub(lambda m: env.get(m.group(1), ""), word))
    return words
