"""A plan's regular expressions (extractions, body and header checks) as the engine runs them:
Rust's `regex` crate (agent/engine/src/pattern.rs), linear time, so without look-around or
backreferences. Those, and a pattern over the engine's bound, are refused here with the place
they are at; the rest of the syntax is the engine's to judge when it compiles the job.
"""

from __future__ import annotations

from loadfleet.controller.model.errors import Problem
from loadfleet.controller.plan.journeys import MAX_PATTERN_BYTES


def regex_problems(pattern: str, path: str) -> list[Problem]:
    """What the engine's regex crate cannot run: look-around and backreferences (it has
    neither: linear time), and patterns over its bound."""
    size = len(pattern.encode("utf-8", "surrogatepass"))
    if size > MAX_PATTERN_BYTES:
        return [Problem(path, f"a pattern of {size} bytes, over the {MAX_PATTERN_BYTES} allowed")]
    refused = _unsupported(pattern)
    if refused:
        why = "the engine's regexes run in linear time, without look-around or backreferences"
        return [Problem(path, f"{refused}: {why}")]
    return []


_GROUP_REFUSED = {
    "?=": "look-ahead",
    "?!": "look-ahead",
    "?<=": "look-behind",
    "?<!": "look-behind",
    "?P=": "a backreference",
}


def _unsupported(pattern: str) -> str | None:
    """The first look-around or backreference outside a character class, in words."""
    i, class_depth = 0, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            after = pattern[i + 1 : i + 3]
            if class_depth == 0 and (after[:1] in tuple("123456789") or after == "k<"):
                return f"'\\{after[:1]}' at {i} is a backreference"
            i += 2
            continue
        if char == "[":
            class_depth += 1
            i += _class_opening(pattern, i)
            continue
        if char == "]" and class_depth:
            class_depth -= 1
        elif char == "(" and class_depth == 0:
            opening = next((o for o in _GROUP_REFUSED if pattern.startswith(o, i + 1)), None)
            if opening:
                return f"'({opening}' at {i} is {_GROUP_REFUSED[opening]}"
        i += 1
    return None


def _class_opening(pattern: str, i: int) -> int:
    """The length of a class's opening at i: `[`, `[^`, and a `]` right after them, which is literal."""
    length = 2 if pattern.startswith("[^", i) else 1
    return length + 1 if pattern.startswith("]", i + length) else length
