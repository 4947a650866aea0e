"""`--target NAME=URL`: one plan runs against a lab and against real hosts unchanged, its named
targets given other urls (checked afterwards like the plan's own)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadfleet.controller.model.errors import Problem


def short(text: str, limit: int = 80) -> str:
    """A user's text quoted in a problem, cut to `limit` characters."""
    return text if len(text) <= limit else text[:limit] + "…"


def replace_target_urls(doc: dict[str, Any], target_urls: Mapping[str, str]) -> list[Problem]:
    """Gives named targets their new urls (checked like the plan's own), so one plan runs
    against a lab and against real hosts unchanged."""
    named: dict[str, int] = {}
    problems = []
    for i, target in enumerate(doc["targets"]):
        if "name" not in target:
            continue
        if target["name"] in named:
            problems.append(
                Problem(f"targets[{i}].name", f"'{target['name']}' names targets[{named[target['name']]}] too")
            )
        named.setdefault(target["name"], i)
    for name, url in target_urls.items():
        if name not in named:
            known = ", ".join(sorted(named)) or "none: give targets a `name`"
            problems.append(Problem("--target", f"no target is named '{short(name)}' (names: {known})"))
        else:
            doc["targets"][named[name]]["url"] = url
    return problems
